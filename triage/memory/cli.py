"""`triage diff`, `triage confirm`, `triage known`, `triage stats`: the team's memory on the command line.

Exit codes as for `triage run`: 0 done, 2 bad input (one line on stderr, nothing stored).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import re
import sys
from pathlib import Path

from triage.errors import BadInput

EXIT_OK = 0
DB_HELP = "the findings database that holds the team's memory (default: $TRIAGE_DB or ~/.cache/triage/triage.db)"


def _catalog_ids(playbooks: Path | None) -> set[str]:
    from triage.catalog import load_catalog
    from triage.graph import DEFAULT_DIR

    return set(load_catalog((playbooks or DEFAULT_DIR) / "verdicts.yaml"))


def _store(ns: argparse.Namespace):
    from triage.memory.store import MemoryStore

    return MemoryStore.open(ns.db)


def _console(ns: argparse.Namespace):
    from rich.console import Console

    return Console(file=sys.stdout, width=ns.width)


# --- triage diff -------------------------------------------------------------------------


def _cmd_diff(ns: argparse.Namespace) -> int:
    from triage.memory.diff import compare, open_baseline
    from triage.run import open_run

    try:
        run = open_run(ns.run, ns.runs_root)
    except BadInput:
        raise
    if ns.baseline:
        baseline = open_baseline(ns.baseline, ns.runs_root)
        if baseline.root.resolve() == run.root.resolve():
            raise BadInput(f"baseline {ns.baseline} is the run itself")
        summary = compare(run, baseline)
    else:
        from triage.memory.baseline import find_baseline
        from triage.memory.enrich import _runs_roots, configure

        configure(db=ns.db, runs_roots=[Path(ns.runs_root)] if ns.runs_root else None)
        with _store(ns) as store:
            found = find_baseline(run, _runs_roots(), store)
        if found is None:
            raise BadInput(f"no good run of the same job as {ns.run} was found (a run that succeeded or was triaged "
                           "healthy, under the runs root or in the store); name one: triage diff RUN BASELINE")
        summary = compare(run, found.run, found_by=found.found_by, status=found.status)
    if ns.json:
        sys.stdout.write(summary.model_dump_json(indent=2) + "\n")
        return EXIT_OK
    head = f"{run.ref} against {summary.baseline_ref} ({summary.baseline_status})"
    lines = summary.lines(limit=200) or ["no argument, version or path changed, no metric left the baseline's band"]
    if ns.markdown:
        out = [f"# Changed since the last good run: `{run.ref}`", "", f"_Baseline `{summary.baseline_ref}` "
               f"({summary.baseline_status}); divergence: {summary.rule}._", ""]
        out += [f"- {line}" for line in lines]
        sys.stdout.write("\n".join(out) + "\n")
        return EXIT_OK
    from rich.text import Text

    console = _console(ns)
    console.print(Text.assemble(("Changed since the last good run: ", "bold"), head))
    for line in lines:
        console.print(Text(f"  {line}"))
    console.print(Text(f"divergence: {summary.rule}", style="dim"))
    return EXIT_OK


# --- triage confirm ----------------------------------------------------------------------


def allowed_users(env: dict[str, str] | None = None) -> set[str]:
    """`TRIAGE_ACTIVE_USERS`: the users allowed to run active probes are those who may confirm a cause."""
    raw = (env if env is not None else os.environ).get("TRIAGE_ACTIVE_USERS", "")
    return {u for u in re.split(r"[,\s]+", raw) if u}


def _cmd_confirm(ns: argparse.Namespace) -> int:
    from triage.memory.store import STORED, UNCHANGED

    user = getpass.getuser()
    if user not in allowed_users():
        raise BadInput(f"{user} may not confirm causes: only the users in TRIAGE_ACTIVE_USERS may; nothing stored")
    ids = _catalog_ids(ns.playbooks)
    if ns.verdict not in ids:
        raise BadInput(f"no verdict {ns.verdict!r} in the catalog (see `triage verdicts`); nothing stored")
    note = (ns.note or "").strip() or None
    if note and len(note) > 2000:
        raise BadInput("the note is over 2000 characters; nothing stored")
    with _store(ns) as store:
        triage = store.triage(ns.triage_id)
        if triage is None:
            raise BadInput(f"no triage {ns.triage_id!r} in {store.path}; nothing stored")
        outcome, cause = store.confirm(triage, ns.verdict, user, note)
    word = "confirmed" if cause.verdict == cause.given else f"corrected from {cause.given} to"
    if outcome == UNCHANGED:
        print(f"already recorded: triage {cause.triage_id} {word} {cause.verdict} by {cause.by} on {cause.at}")
    else:
        print(f"{'stored' if outcome == STORED else 'replaced'}: triage {cause.triage_id} {word} {cause.verdict} "
              f"by {cause.by} on {cause.at}")
    return EXIT_OK


# --- triage known ------------------------------------------------------------------------


def _cmd_known(ns: argparse.Namespace) -> int:
    from triage.memory.known import export_known, read_known

    with _store(ns) as store:
        if ns.import_file is not None:
            records = read_known(ns.import_file, _catalog_ids(ns.playbooks))
            new, same = store.import_confirmations(records)
            print(f"imported {new} confirmed cause(s) from {ns.import_file}; {same} already known")
            return EXIT_OK
        if ns.export_file is not None:
            n = export_known(store, ns.export_file)
            print(f"exported {n} confirmed cause(s) to {ns.export_file}")
            return EXIT_OK
        records = store.confirmations()
    if ns.json:
        sys.stdout.write(json.dumps(records, indent=2) + "\n")
        return EXIT_OK
    from rich.table import Table

    table = Table(title=f"Confirmed causes ({len(records)})", show_lines=False)
    for col in ("triage", "run", "given", "real cause", "by", "on", "note", "signature"):
        table.add_column(col, overflow="fold")
    for r in records:
        table.add_row(r["triage_id"], r["run"] or "-", r["given"], r["verdict"], r["by"], r["at"][:10],
                      r["note"] or "", (r["signature"] or "-")[:48])
    _console(ns).print(table)
    return EXIT_OK


# --- triage stats ------------------------------------------------------------------------


def _cmd_stats(ns: argparse.Namespace) -> int:
    from triage.memory.stats import verdict_stats

    with _store(ns) as store:
        rows = verdict_stats(store)
    if ns.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return EXIT_OK
    from rich.table import Table

    table = Table(title="Verdict quality in this team's runs", show_lines=False)
    for col in ("verdict", "given", "confirmed", "corrected", "corrected to", "precision"):
        table.add_column(col, overflow="fold")
    for r in rows:
        to = ", ".join(f"{k} ×{v}" for k, v in r["corrected_to"].items()) or "-"
        prec = "-" if r["precision"] is None else f"{r['precision']:.0%}"
        table.add_row(r["id"], str(r["given"]), str(r["confirmed"]), str(r["corrected"]), to, prec)
    _console(ns).print(table)
    return EXIT_OK


def add_memory_parsers(sub) -> None:
    d = sub.add_parser("diff", help="what changed between a run and the last good run of the same job")
    d.add_argument("run", help="the run (a directory, or a run-id under the runs root)")
    d.add_argument("baseline", nargs="?", default=None,
                   help="the good run to compare with (default: the last run of the same job that succeeded or was "
                        "triaged healthy, under the runs root or in the store)")
    d.add_argument("--runs-root", default=None, help="where run-ids live (default: $TRIAGE_RUNS_ROOT)")
    d.add_argument("--db", default=None, help=DB_HELP)
    fmt = d.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--markdown", action="store_true")
    d.set_defaults(func=_cmd_diff)

    c = sub.add_parser("confirm", help="record the real cause of a triage (users in TRIAGE_ACTIVE_USERS)")
    c.add_argument("triage_id", help="the triage id the report shows")
    c.add_argument("verdict", help="the catalog id of the real cause (the triage's own verdict to confirm it)")
    c.add_argument("--note", default=None, help="what it was, in a sentence")
    c.add_argument("--db", default=None, help=DB_HELP)
    c.set_defaults(func=_cmd_confirm)

    k = sub.add_parser("known", help="list the confirmed causes; export or import them as a file")
    io = k.add_mutually_exclusive_group()
    io.add_argument("--export", dest="export_file", type=Path, default=None, metavar="FILE")
    io.add_argument("--import", dest="import_file", type=Path, default=None, metavar="FILE",
                   help="all or nothing: a malformed record refuses the file")
    k.add_argument("--json", action="store_true")
    k.add_argument("--db", default=None, help=DB_HELP)
    k.set_defaults(func=_cmd_known)

    s = sub.add_parser("stats", help="per verdict id: how often given, confirmed, corrected (and to what)")
    s.add_argument("--json", action="store_true")
    s.add_argument("--db", default=None, help=DB_HELP)
    s.set_defaults(func=_cmd_stats)
