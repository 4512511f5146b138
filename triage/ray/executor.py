"""Probes on a Ray cluster: `triage run … --executor ray --ray-address http://HEAD:8265`.

Each probe is one Ray task with the resources it declares: one GPU for a GPU probe, one
CPU otherwise. The task is given names and text, never objects: the run's directory
(the worker re-opens it, so the cluster must see it on a shared filesystem), the node
id, the probe's name and import path, and its parameters as JSON. It returns the
finding as JSON. So a worker parses the run itself, and nothing of the driver's state
(parsed logs, open files) travels.

What can go wrong on a cluster becomes a finding, and the walk goes on:
- a probe that runs past its timeout is cancelled (`ray.cancel(force=True)` kills its
  worker) and ends `error`, naming the timeout;
- a worker that dies under a probe (killed, OOM-killed, its node lost) is retried a
  bounded number of times, then the probe ends `error` naming the death;
- a GPU probe on a cluster with no GPU ends `unavailable` at once rather than waiting
  for a GPU that will never come.

While a probe runs longer than a moment (`speculate_after_s`), the probes the walk may
need next (the nodes one edge away) are started speculatively when the cluster has idle
CPUs or GPUs, cheapest first, and cancelled as soon as the walk moves where they can no
longer be reached. Probes that talk to a live engine are never started on a guess.
"""

from __future__ import annotations

import importlib
import logging
import os
import socket
import sys
import time
import uuid
import weakref
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import networkx as nx
import structlog

from triage.errors import BadInput, TriageError
from triage.finding import ERROR, UNAVAILABLE, Finding, Missing
from triage.graph import Node
from triage.probe import Cost, Probe
from triage.run.run import NEEDS_HELP, Run

if TYPE_CHECKING:
    from triage.graph import DecisionGraph

log = structlog.get_logger("triage.ray.executor")

# Per attempt; a GPU probe that replays a training step needs far longer than a log scan.
DEFAULT_TIMEOUT_S = {Cost.STATIC: 300.0, Cost.CPU: 1800.0, Cost.GPU: 3600.0}
COST_RANK = {Cost.STATIC: 0, Cost.CPU: 1, Cost.GPU: 2}
NAMESPACE = "triage"
RESOURCE_TTL_S = 15.0


# --------------------------------------------------------------------------------------
# addresses


def gcs_address_from_dashboard(url: str, timeout_s: float = 10.0) -> str:
    """The cluster's GCS address (what `ray.init` takes), asked of its dashboard.

    The dashboard reports each node's processes with their command lines; the head
    node's raylet is started with `--gcs-address=HOST:PORT`.
    """
    try:
        from triage.ray.jobs_api import request_headers

        resp = httpx.get(url.rstrip("/") + "/nodes", params={"view": "summary"}, timeout=timeout_s,
                         headers=request_headers())
        if resp.status_code in (401, 403):
            raise BadInput(f"the Ray dashboard at {url} refused the request (HTTP {resp.status_code}): set "
                           "$RAY_AUTH_TOKEN (or ~/.ray/auth_token) to the cluster's token")
        data = resp.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise BadInput(f"cannot reach the Ray dashboard at {url} to find the cluster ({type(exc).__name__}): "
                       "is the cluster up? --ray-address also takes HOST:6379 or ray://HOST:10001") from None
    nodes = (((data or {}).get("data") or {}).get("summary")) or []
    nodes = sorted(nodes, key=lambda n: not ((n.get("raylet") or {}).get("isHeadNode")))
    for node in nodes:
        lines = list(node.get("cmdline") or []) + list(((node.get("gcs") or {}).get("cmdline")) or [])
        for arg in lines:
            if isinstance(arg, str) and arg.startswith("--gcs-address="):
                return arg.split("=", 1)[1]
        for arg in lines:
            if isinstance(arg, str) and arg.startswith("--gcs_server_port=") and node.get("ip"):
                return f"{node['ip']}:{arg.split('=', 1)[1]}"
    raise BadInput(f"the Ray dashboard at {url} does not say where the cluster's GCS is: "
                   "pass --ray-address HOST:6379 (the head's GCS) or ray://HOST:10001")


def cluster_address(address: str | None) -> str:
    """What `ray.init` should connect to, from a dashboard URL, a GCS address, ray://, or $RAY_ADDRESS."""
    raw = (address or os.environ.get("RAY_ADDRESS") or "auto").strip()
    if raw.startswith(("http://", "https://")):
        return gcs_address_from_dashboard(raw)
    return raw


def _split_host_port(address: str) -> tuple[str, int] | None:
    if "://" in address or address in ("auto", "local"):
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def _is_loopback(address: str) -> bool:
    hp = _split_host_port(address)
    return hp is not None and (hp[0] in ("localhost", "::1") or hp[0].startswith("127."))


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail in seconds, with one line, where `ray.init` would keep retrying an address nothing listens on."""
    hp = _split_host_port(address)
    if hp is None:
        return
    try:
        socket.create_connection(hp, timeout=timeout_s).close()
    except OSError as exc:
        raise BadInput(f"no Ray cluster answers at {address} ({exc.strerror or exc}): is the head up?") from None


def module_root(module_name: str) -> str | None:
    """The sys.path entry a module was imported from, so a worker can import it the same way."""
    mod = sys.modules.get(module_name)
    path = getattr(mod, "__file__", None)
    if not path:
        return None
    p = Path(path).resolve()
    depth = module_name.count(".") + (1 if p.name == "__init__.py" else 0)
    root = p.parent
    for _ in range(depth):
        root = root.parent
    return str(root)


def probe_ref(probe_cls: type[Probe]) -> str:
    return f"{probe_cls.__module__}:{probe_cls.__qualname__}"


# --------------------------------------------------------------------------------------
# the worker side


_WORKER_RUNS: OrderedDict[tuple, Run] = OrderedDict()
_WORKER_RUNS_MAX = 4


def _load_probe_class(name: str, ref: str) -> type[Probe]:
    from triage.probe import registry

    try:
        registered = registry().get(name)
    except TriageError:
        registered = None
    if registered is not None and probe_ref(registered) == ref:
        return registered
    module, _, qual = ref.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qual.split("."):
        obj = getattr(obj, part)
    if not (isinstance(obj, type) and issubclass(obj, Probe) and obj.name == name):
        raise TypeError(f"{ref} is not the probe {name!r}")
    return obj


def _worker_run(spec: dict[str, Any]) -> Run:
    from triage.run import open_run

    key = (spec["root"], spec["token"], tuple(spec["engines"]), spec["engine_writes_allowed"],
           bool(spec.get("relaunch_allowed")), tuple(sorted((spec.get("relaunch_env") or {}).items())))
    run = _WORKER_RUNS.get(key)
    if run is None:
        run = open_run(spec["root"], runs_root="")
        run.ref = spec["ref"]
        run.engines = list(spec["engines"])
        run.engine_writes_allowed = bool(spec["engine_writes_allowed"])
        run.relaunch_allowed = bool(spec.get("relaunch_allowed"))
        run.relaunch_env = dict(spec.get("relaunch_env") or {})
        _WORKER_RUNS[key] = run
        while len(_WORKER_RUNS) > _WORKER_RUNS_MAX:
            _WORKER_RUNS.popitem(last=False)
    _WORKER_RUNS.move_to_end(key)
    return run


def probe_task(spec: dict[str, Any]) -> str:
    """Runs inside a Ray worker: re-open the run, load the probe by name, examine; the finding as JSON."""
    from triage.executor import examine

    base = {"node": spec["node"], "probe": spec["probe"], "outcome": ERROR}
    started = time.perf_counter()
    try:
        probe_cls = _load_probe_class(spec["probe"], spec["probe_ref"])
        params = probe_cls.Params.model_validate_json(spec["params"])
    except Exception as exc:  # noqa: BLE001 - the cluster lacks the probe's code: a finding, not a crash
        msg = (f"probe {spec['probe']} could not be loaded on the Ray worker ({type(exc).__name__}: {exc}); "
               "the cluster's Python environment needs the same triage and probes as this one")
        return Finding(**base, summary=msg, error=msg).model_dump_json()
    theirs, ours = list(probe_cls.all_outcomes()), list(spec.get("outcomes") or probe_cls.all_outcomes())
    if theirs != ours:
        msg = (f"probe {spec['probe']} on the Ray worker declares outcomes {theirs}, the triage's declares {ours}: "
               "the cluster runs another version of the probes")
        return Finding(**base, summary=msg, error=msg).model_dump_json()
    try:
        run = _worker_run(spec)
    except TriageError as exc:
        msg = (f"the Ray worker cannot open the run at {spec['root']} ({exc}); probes on a cluster need the "
               "run on a filesystem every node sees (set $TRIAGE_RAY_CACHE to one for Ray job runs)")
        return Finding(**base, summary=msg, error=msg, duration_s=time.perf_counter() - started).model_dump_json()
    node = Node(spec["node"], spec["playbook"], spec["probe"], params, spec["ask"], {})
    return examine(node, probe_cls, run).model_dump_json()


# --------------------------------------------------------------------------------------
# the driver side


@dataclass
class _Task:
    key: tuple[str, str, str]
    node: Node
    probe_cls: type[Probe]
    ref: Any
    attempt: int
    speculative: bool
    submitted: float = field(default_factory=time.monotonic)


class RayExecutor:
    """Runs each probe as a Ray task; see the module docstring for what becomes of failures."""

    def __init__(
        self,
        address: str | None = None,
        timeout_s: float | None = None,
        retries: int = 1,
        *,
        speculate: bool = True,
        max_speculative: int = 2,
        speculate_after_s: float = 0.5,
        graph: DecisionGraph | None = None,
    ) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self.retries = max(0, retries)
        self.speculate = speculate
        self.max_speculative = max(0, max_speculative)
        self.speculate_after_s = max(0.0, speculate_after_s)
        self.stats: Counter[str] = Counter()
        self._graph = graph
        self._graph_loaded = graph is not None
        self._remote: Any = None
        self._tokens: weakref.WeakKeyDictionary[Run, str] = weakref.WeakKeyDictionary()
        self._current_token: str | None = None
        self._speculative: dict[tuple[str, str, str], _Task] = {}
        self._resources: tuple[float, dict[str, float]] = (0.0, {})
        self._roots = [r for r in (module_root("triage"), module_root("probes")) if r]

    # -- wiring ---------------------------------------------------------------------

    def attach(self, graph: DecisionGraph) -> None:
        """The graph being walked: where the probes the walk may need next are found."""
        self._graph = graph
        self._graph_loaded = True

    def _connect(self) -> None:
        if self._remote is not None:
            return
        target = None if "ray" in sys.modules and sys.modules["ray"].is_initialized() else cluster_address(self.address)
        if target is not None and "ray" not in sys.modules and _is_loopback(target):
            # A head started with --node-ip-address 127.0.0.1 listens on loopback only; without
            # this Ray swaps 127.0.0.1 for the machine's address and never reaches it.
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        import ray

        if target is not None and not ray.is_initialized():
            _check_reachable(target)
            try:
                ray.init(address=target, namespace=NAMESPACE, log_to_driver=False, logging_level=logging.ERROR)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise BadInput(f"cannot connect to the Ray cluster at {target}: {first}") from None
        self._remote = ray.remote(probe_task)

    def _runtime_env(self, probe_cls: type[Probe]) -> dict[str, Any]:
        roots = list(self._roots)
        extra = module_root(probe_cls.__module__)
        if extra and extra not in roots:
            roots.append(extra)
        return {"env_vars": {"PYTHONPATH": os.pathsep.join(roots + ["${PYTHONPATH}"])}}

    def _token(self, run: Run) -> str:
        token = self._tokens.get(run)
        if token is None:
            token = self._tokens[run] = uuid.uuid4().hex
        if token != self._current_token:
            self.cancel_speculative()  # a new run: guesses made for another are worthless
            self._current_token = token
        return token

    def _cluster_resources(self) -> dict[str, float]:
        import ray

        at, cached = self._resources
        if time.monotonic() - at > RESOURCE_TTL_S or not cached:
            cached = dict(ray.cluster_resources())
            self._resources = (time.monotonic(), cached)
        return cached

    # -- tasks ----------------------------------------------------------------------

    def _timeout(self, probe_cls: type[Probe]) -> float:
        return float(self.timeout_s) if self.timeout_s is not None else DEFAULT_TIMEOUT_S[probe_cls.cost]

    def _submit(self, node: Node, probe_cls: type[Probe], run: Run, key: tuple[str, str, str],
                attempt: int, speculative: bool) -> _Task:
        spec = {
            "root": str(run.root), "token": key[0], "ref": run.ref, "engines": list(run.engines),
            "engine_writes_allowed": bool(run.engine_writes_allowed), "relaunch_allowed": bool(run.relaunch_allowed),
            "relaunch_env": dict(run.relaunch_env), "node": node.id, "playbook": node.playbook,
            "ask": node.ask, "probe": probe_cls.name, "probe_ref": probe_ref(probe_cls), "params": key[2],
            "outcomes": list(probe_cls.all_outcomes()), "attempt": attempt,
        }
        gpu = probe_cls.cost == Cost.GPU
        ref = self._remote.options(
            num_cpus=0 if gpu else 1, num_gpus=1 if gpu else 0, max_retries=0, retry_exceptions=False,
            name=f"triage:{node.id}", runtime_env=self._runtime_env(probe_cls),
        ).remote(spec)
        self.stats["speculative_started" if speculative else "submitted"] += 1
        return _Task(key, node, probe_cls, ref, attempt, speculative)

    def _error(self, node: Node, probe_cls: type[Probe], summary: str, started: float) -> Finding:
        return Finding(node=node.id, probe=probe_cls.name, outcome=ERROR, summary=summary, error=summary,
                       duration_s=time.perf_counter() - started)

    def run_probe(self, node: Node, probe_cls: type[Probe], run: Run) -> Finding:
        started = time.perf_counter()
        self._connect()
        if probe_cls.cost == Cost.GPU and self._cluster_resources().get("GPU", 0) < 1:
            reason = "the Ray cluster has no GPU for this GPU probe"
            return Finding(node=node.id, probe=probe_cls.name, outcome=UNAVAILABLE, summary=reason,
                           missing=Missing(artifact="gpu", reason=reason, command=NEEDS_HELP["gpu"]))
        key = (self._token(run), node.id, node.params.model_dump_json())
        task = self._speculative.pop(key, None)
        if task is not None:
            self.stats["speculative_used"] += 1
        else:
            task = self._submit(node, probe_cls, run, key, attempt=1, speculative=False)
        self._prune(node)
        return self._await(task, run, started)

    def _await(self, task: _Task, run: Run, started: float) -> Finding:
        import ray
        from ray.exceptions import (
            LocalRayletDiedError, NodeDiedError, ObjectLostError, OutOfMemoryError, RayError, RayTaskError,
            TaskCancelledError, WorkerCrashedError,
        )

        deaths = (WorkerCrashedError, NodeDiedError, LocalRayletDiedError, OutOfMemoryError, ObjectLostError,
                  RayTaskError)
        node, probe_cls = task.node, task.probe_cls
        timeout = self._timeout(probe_cls)
        deadline = time.monotonic() + timeout
        # Probes are started ahead only once this one has run a moment: most finish in milliseconds,
        # and a guess started beside them would only compete with the walk for workers.
        guessed = not self.speculate or self.max_speculative == 0
        while True:
            remaining = max(0.0, deadline - time.monotonic())
            ready, _ = ray.wait([task.ref], timeout=remaining if guessed else min(remaining, self.speculate_after_s))
            if not ready and not guessed:
                guessed = True
                self._start_speculative(node, run, task.key[0])
                continue
            if not ready:
                ray.cancel(task.ref, force=True)
                self.stats["timeouts"] += 1
                log.warning("probe_timeout", probe=probe_cls.name, node=node.id, timeout_s=timeout)
                return self._error(node, probe_cls, f"probe {probe_cls.name} timed out: no result within {timeout:g} s "
                                   "on the Ray cluster (queued or running); its task was cancelled", started)
            try:
                finding = Finding.model_validate_json(ray.get(task.ref))
                if finding.outcome not in probe_cls.all_outcomes():  # the walk has no edge for it
                    return self._error(node, probe_cls, f"probe {probe_cls.name} on the Ray worker answered "
                                       f"{finding.outcome!r}, an outcome this version of it does not declare", started)
                return finding
            except TaskCancelledError:
                return self._error(node, probe_cls, f"probe {probe_cls.name} was cancelled on the Ray cluster", started)
            except deaths as exc:
                reason = _first_line(exc)
                if task.attempt <= self.retries:
                    self.stats["retries"] += 1
                    log.warning("probe_worker_died", probe=probe_cls.name, node=node.id, attempt=task.attempt,
                                reason=reason)
                    task = self._submit(node, probe_cls, run, task.key, task.attempt + 1, speculative=False)
                    deadline = time.monotonic() + timeout
                    continue
                self.stats["worker_deaths"] += 1
                times = "once" if task.attempt == 1 else f"{task.attempt} times"
                return self._error(node, probe_cls, f"the Ray worker running probe {probe_cls.name} died {times} "
                                   f"({type(exc).__name__}: {reason})", started)
            except RayError as exc:
                return self._error(node, probe_cls, f"probe {probe_cls.name} failed on the Ray cluster "
                                   f"({type(exc).__name__}: {_first_line(exc)})", started)

    # -- speculation ----------------------------------------------------------------

    def _graph_for(self, node: Node) -> DecisionGraph | None:
        """The attached graph, else the built-in playbooks when this node is theirs."""
        if not self._graph_loaded:
            self._graph_loaded = True
            try:
                from triage.graph import load_graph

                self._graph = load_graph()
            except TriageError:
                self._graph = None
        graph = self._graph
        if graph is None:
            return None
        known = graph.nodes.get(node.id)
        if known is None or known.probe != node.probe or known.params != node.params:
            return None
        return graph

    def _prune(self, current: Node) -> None:
        """Cancel the speculative probes the walk can no longer reach from where it is."""
        if not self._speculative:
            return
        graph = self._graph_for(current)
        reachable = (nx.descendants(graph.graph, current.id) | {current.id}) if graph is not None else set()
        for key, task in list(self._speculative.items()):
            if task.node.id not in reachable:
                self._cancel(key)

    def _cancel(self, key: tuple[str, str, str]) -> None:
        import ray

        task = self._speculative.pop(key)
        try:
            ray.cancel(task.ref, force=False)
        except Exception as exc:  # noqa: BLE001 - already finished or gone: nothing to cancel
            log.debug("cancel_failed", node=task.node.id, error=repr(exc))
        self.stats["speculative_cancelled"] += 1

    def cancel_speculative(self) -> None:
        """Cancel every probe started on a guess (call when a walk is over)."""
        for key in list(self._speculative):
            self._cancel(key)

    close = cancel_speculative

    def _start_speculative(self, current: Node, run: Run, token: str) -> None:
        if not self.speculate or self.max_speculative == 0:
            return
        graph = self._graph_for(current)
        if graph is None:
            return
        import ray

        nexts = [graph.nodes[t] for t in dict.fromkeys(current.edges.values()) if t in graph.nodes]
        nexts.sort(key=lambda n: COST_RANK[graph.probes[n.probe].cost])
        # Idle is what the cluster has beyond this walk's own running probes; what Ray reports
        # free caps it (others may be using the cluster), whether or not it counts the current probe yet.
        pending = self._unfinished_speculative()
        gpu_now = graph.probes[current.probe].cost == Cost.GPU
        own_cpu = (0 if gpu_now else 1) + sum(1 for t in pending if t.probe_cls.cost != Cost.GPU)
        own_gpu = (1 if gpu_now else 0) + sum(1 for t in pending if t.probe_cls.cost == Cost.GPU)
        total, avail = self._cluster_resources(), ray.available_resources()
        free_cpu = min(int(total.get("CPU", 0)) - own_cpu, int(avail.get("CPU", 0)))
        free_gpu = min(int(total.get("GPU", 0)) - own_gpu, int(avail.get("GPU", 0)))
        room = self.max_speculative - len(pending)
        log.debug("speculation", node=current.id, free_cpu=free_cpu, free_gpu=free_gpu, room=room,
                  candidates=[n.id for n in nexts])
        for nxt in nexts:
            if room <= 0:
                break
            cls = graph.probes[nxt.probe]
            if "engine" in cls.needs or "engine_weights" in cls.needs:
                continue  # never send requests to a live engine on a guess
            key = (token, nxt.id, nxt.params.model_dump_json())
            if key in self._speculative:
                continue
            if cls.cost == Cost.GPU:
                if free_gpu < 1:
                    continue
                free_gpu -= 1
            else:
                if free_cpu < 1:
                    continue
                free_cpu -= 1
            self._speculative[key] = self._submit(nxt, cls, run, key, attempt=1, speculative=True)
            room -= 1

    def _unfinished_speculative(self) -> list[_Task]:
        import ray

        tasks = list(self._speculative.values())
        if not tasks:
            return []
        _, not_ready = ray.wait([t.ref for t in tasks], num_returns=len(tasks), timeout=0)
        waiting = set(not_ready)
        return [t for t in tasks if t.ref in waiting]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line[:300]
    return type(exc).__name__
