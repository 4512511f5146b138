"""`triage` command line: run, graph, probes, verdicts.

Exit codes: 0 a verdict was reached (healthy included), 3 inconclusive,
2 bad input or usage, 1 internal error. The report goes to stdout, diagnostics to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import structlog

from triage import __version__
from triage.errors import BadInput, PlaybookError, TriageError

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
EXIT_INCONCLUSIVE = 3


def _cmd_run(ns: argparse.Namespace) -> int:
    from rich.console import Console

    from triage.api import triage_run
    from triage.graph import load_graph
    from triage.render.markdown import render_markdown
    from triage.render.terminal import render_terminal

    from triage.sources import open_any_run

    from triage.engines.consent import allow_list, consent_engines

    allowed = allow_list(ns.engine_allow or [])
    run = open_any_run(ns.run, runs_root=ns.runs_root, ray_address=ns.ray_address, allow_paths=ns.allow_path or [])
    consent_engines(run, allowed, given=ns.engine or [])
    run.engine_writes_allowed = ns.allow_engine_writes
    run.relaunch_allowed = ns.allow_relaunch
    if ns.known_bugs:
        from triage.known_bugs import use_known_bug_files

        use_known_bug_files(ns.known_bugs)
    from triage.memory.enrich import configure

    if ns.baseline:
        from triage.memory.diff import open_baseline

        open_baseline(ns.baseline, ns.runs_root)  # not a run: one line, before the triage
    configure(db=ns.cache_db, runs_roots=[Path(ns.runs_root)] if ns.runs_root else None, baseline=ns.baseline)
    try:
        report = triage_run(run, load_graph(ns.playbooks) if ns.playbooks else None, executor=_executor(ns))
    finally:
        configure()  # the baseline was for this run only
    if ns.json:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    elif ns.markdown:
        sys.stdout.write(render_markdown(report))
    else:
        render_terminal(report, Console(file=sys.stdout, width=ns.width))
    return EXIT_INCONCLUSIVE if report.inconclusive else EXIT_OK


def _executor(ns: argparse.Namespace):
    """The executor the flags ask for: local or Ray, behind the findings cache unless --no-cache."""
    from triage.executor import LocalExecutor

    inner = LocalExecutor()
    if ns.executor == "ray":
        from triage.ray.executor import RayExecutor

        inner = RayExecutor(address=ns.ray_address)
    if ns.no_cache:
        return inner
    from triage.cache import CachingExecutor, FindingsCache

    return CachingExecutor(inner, FindingsCache.open(ns.cache_db))


def _cmd_graph(ns: argparse.Namespace) -> int:
    from triage.graph import load_graph
    from triage.render.diagram import render_dot, render_mermaid

    graph = load_graph(ns.playbooks)
    if ns.playbook not in graph.playbooks:
        raise BadInput(f"no playbook {ns.playbook!r}; playbooks: {', '.join(sorted(graph.playbooks))}")
    render = render_dot if ns.format == "dot" else render_mermaid
    sys.stdout.write(render(graph, ns.playbook))
    return EXIT_OK


def _cmd_probes(ns: argparse.Namespace) -> int:
    from triage.probe import registry

    rows = [
        {"name": cls.name, "cost": cls.cost.value, "needs": list(cls.needs), **cls.capabilities(),
         "outcomes": list(cls.all_outcomes()), "description": cls.description()}
        for cls in registry().values()
    ]
    if ns.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return EXIT_OK
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Registered probes (entry-point group triage.probes)", show_lines=True)
    for col in ("probe", "cost", "beyond reading", "needs", "outcomes", "what it checks"):
        table.add_column(col)
    for r in rows:
        beyond = ", ".join(k.replace("_", " ") for k in ("executes_run_code", "contacts_engine", "writes_to_engine")
                           if r[k]) or "-"
        table.add_row(r["name"], r["cost"], beyond, ", ".join(r["needs"]) or "-", ", ".join(r["outcomes"]),
                      r["description"])
    Console(file=sys.stdout, width=ns.width).print(table)
    return EXIT_OK


def _cmd_verdicts(ns: argparse.Namespace) -> int:
    from triage.graph import DEFAULT_DIR
    from triage.catalog import load_catalog

    catalog = load_catalog((ns.playbooks or DEFAULT_DIR) / "verdicts.yaml")
    if ns.json:
        sys.stdout.write(json.dumps([v.model_dump() for v in catalog.values()], indent=2) + "\n")
        return EXIT_OK
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Verdict catalog", show_lines=True)
    for col in ("id", "title", "remedy"):
        table.add_column(col)
    for v in catalog.values():
        table.add_row(v.id, v.title, v.remedy)
    Console(file=sys.stdout, width=ns.width).print(table)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="triage", description="Root-cause triage for LLM RL post-training runs.")
    p.add_argument("--version", action="version", version=f"triage {__version__}")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more diagnostics on stderr")
    p.add_argument("--playbooks", type=Path, default=None, help="a playbooks directory instead of the built-in one")
    p.add_argument("--width", type=int, default=None, help=argparse.SUPPRESS)
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="triage a run and print the root-cause report")
    run.add_argument("run", help="a run directory, a run-id under the runs root, a single log file, "
                                 "or - for a log fragment on standard input")
    run.add_argument("--runs-root", default=None, help="where run-ids live (default: $TRIAGE_RUNS_ROOT)")
    run.add_argument("--allow-path", action="append", metavar="DIR",
                     help="let the run's paths lead into DIR too (repeatable; also $TRIAGE_ALLOWED_ROOTS, "
                          "os.pathsep-separated), e.g. checkpoints on shared storage; other paths outside "
                          "the run directory are skipped and the report says so")
    run.add_argument("--engine", action="append", metavar="URL",
                     help="a live SGLang server serving the run's weights (repeatable), e.g. http://127.0.0.1:30000")
    run.add_argument("--allow-engine-writes", action="store_true",
                     help="let engine probes send requests that change the engine (update_weights_*, flush_cache)")
    run.add_argument("--engine-allow", action="append", metavar="HOST:PORT",
                     help="contact an engine the run names (manifest engines:) at this address (repeatable; "
                          "also $TRIAGE_ENGINE_ALLOW, comma-separated); others are listed as not contacted")
    run.add_argument("--allow-relaunch", action="store_true",
                     help="let replay probes start the run's own job (it runs the run's code); without it "
                          "the report shows the command instead")
    run.add_argument("--executor", choices=("local", "ray"), default="local",
                     help="where probes run: in this process (default) or as Ray tasks")
    run.add_argument("--ray-address", default=None,
                     help="Ray dashboard address for ray job sources and --executor ray (default: $RAY_ADDRESS)")
    run.add_argument("--no-cache", action="store_true", help="rerun every probe instead of reusing cached findings")
    run.add_argument("--cache-db", default=None, help="findings cache file (default: $TRIAGE_DB or ~/.cache/triage/triage.db)")
    run.add_argument("--known-bugs", action="append", metavar="FILE", default=None,
                     help="a file of your own known-bug entries, matched with the shipped index (repeatable; $TRIAGE_KNOWN_BUGS)")
    run.add_argument("--baseline", default=None, metavar="DIR",
                     help="the last good run to compare with (default: the last run of the same job that succeeded "
                          "or was triaged healthy, under the runs root or in the store)")
    fmt = run.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="the report as JSON (root_cause.id, path, ...)")
    fmt.add_argument("--markdown", action="store_true", help="the report as Markdown")
    run.set_defaults(func=_cmd_run)

    graph = sub.add_parser("graph", help="draw a playbook as Mermaid or DOT")
    graph.add_argument("playbook")
    graph.add_argument("--format", choices=("mermaid", "dot"), default="mermaid")
    graph.set_defaults(func=_cmd_graph)

    probes = sub.add_parser("probes", help="list the registered probes and what each needs")
    probes.add_argument("--json", action="store_true")
    probes.set_defaults(func=_cmd_probes)

    verdicts = sub.add_parser("verdicts", help="list the verdict catalog")
    verdicts.add_argument("--json", action="store_true")
    verdicts.set_defaults(func=_cmd_verdicts)

    from triage.bench import add_bench_parser
    from triage.known_bugs import add_known_bugs_parser
    from triage.memory.cli import add_memory_parsers
    from triage.postmortem import add_postmortem_parser
    from triage.ray.watch import add_watch_parser
    from triage.service.cli import add_serve_parser

    add_bench_parser(sub)
    add_known_bugs_parser(sub)
    add_memory_parsers(sub)
    add_postmortem_parser(sub)
    add_serve_parser(sub)
    add_watch_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    from triage.logging import configure

    parser = build_parser()
    ns = parser.parse_args(argv)
    configure(ns.verbose)
    try:
        return ns.func(ns)
    except (BadInput, PlaybookError) as exc:
        print(f"triage: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except TriageError as exc:
        print(f"triage: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("triage: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001
        structlog.get_logger("triage").error("internal_error", error=repr(exc), exc_info=ns.verbose > 0)
        print(f"triage: internal error: {type(exc).__name__}: {exc} (rerun with -v for details)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
