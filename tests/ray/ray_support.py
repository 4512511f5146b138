"""A real local Ray head for the tests: every port on 127.0.0.1, stopped by whoever started it.

`ray stop` would stop every Ray process on the machine, other people's included, so a
head is stopped by process id instead: `ray start` runs in a new session, every Ray
daemon it launches stays in that session, and the job entrypoints (which Ray starts
in sessions of their own) are found as descendants of those daemons.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from triage.ray.jobs_api import request_headers

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent
RAY = VENV_BIN / "ray"


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """`n` distinct free loopback ports: every socket is held until all are bound, so the
    kernel cannot hand the same port out twice (Ray refuses a head given a port twice)."""
    with contextlib.ExitStack() as held:
        socks = [held.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def _proc_table() -> dict[int, tuple[int, int, str]]:
    """pid -> (ppid, session id, state) for every process."""
    out: dict[int, tuple[int, int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2:].split()
        out[int(entry)] = (int(rest[1]), int(rest[3]), rest[0])
    return out


def session_processes(sid: int) -> set[int]:
    """The live processes of session `sid` and all their descendants."""
    table = _proc_table()
    found = {pid for pid, (_, s, state) in table.items() if s == sid and state != "Z"}
    changed = True
    while changed:
        changed = False
        for pid, (ppid, _, state) in table.items():
            if ppid in found and pid not in found and state != "Z":
                found.add(pid)
                changed = True
    return found


class RayHead:
    """One Ray head on fixed loopback ports, which can be stopped and started again on them."""

    def __init__(self, num_cpus: int = 2, num_gpus: int = 0) -> None:
        self.num_cpus = num_cpus
        self.num_gpus = num_gpus
        self.temp_dir = Path(tempfile.mkdtemp(prefix="trgray", dir="/tmp"))
        names = ("port", "dashboard-port", "ray-client-server-port", "node-manager-port", "object-manager-port",
                 "metrics-export-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port", "runtime-env-agent-port")
        self.ports = dict(zip(names, free_ports(len(names)), strict=True))
        self.sid: int | None = None
        self.starts = 0

    @property
    def dashboard(self) -> str:
        return f"http://127.0.0.1:{self.ports['dashboard-port']}"

    @property
    def gcs(self) -> str:
        return f"127.0.0.1:{self.ports['port']}"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
            "RAY_USAGE_STATS_ENABLED": "0",
            # workers and job entrypoints import triage and the test probes
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)]),
            "PATH": f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
        })
        env.pop("RAY_ADDRESS", None)
        return env

    def start(self, timeout_s: float = 120.0) -> None:
        cmd = [str(RAY), "start", "--head", "--node-ip-address", "127.0.0.1", "--dashboard-host", "127.0.0.1",
               "--include-dashboard", "true", "--disable-usage-stats", "--num-cpus", str(self.num_cpus),
               "--num-gpus", str(self.num_gpus), "--temp-dir", str(self.temp_dir), "--min-worker-port", "0", "--max-worker-port", "0"]
        for name, port in self.ports.items():
            cmd += [f"--{name}", str(port)]
        proc = subprocess.Popen(cmd, env=self.env(), start_new_session=True, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        self.sid = proc.pid
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.stop()
            raise RuntimeError("ray start did not finish") from None
        if proc.returncode != 0:
            self.stop()
            raise RuntimeError(f"ray start failed ({proc.returncode}):\n{out[-3000:]}")
        self.starts += 1
        self._wait_for_job_api(timeout_s)

    def _wait_for_job_api(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.dashboard + "/api/jobs/", timeout=5, headers=request_headers()).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        logs = self.temp_dir / "session_latest" / "logs"
        tails = []
        for name in ("dashboard.err", "dashboard.log", "dashboard_JobHead.err"):
            f = logs / name
            if f.is_file():
                tails.append(f"--- {name}\n" + "\n".join(f.read_text(errors="replace").splitlines()[-15:]))
        raise RuntimeError(f"the Job API at {self.dashboard} did not come up\n" + "\n".join(tails))

    def stop(self, grace_s: float = 2.0) -> None:
        """Stop every process this head started (and the drivers Ray started for its jobs)."""
        disconnect_driver()
        if self.sid is None:
            return
        pids = session_processes(self.sid)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline:
                pids = {p for p in pids if _alive(p)}
                if not pids:
                    break
                time.sleep(0.2)
            if not pids:
                break
        self.sid = None

    def restart(self) -> None:
        self.stop()
        self.start()

    # -- jobs -------------------------------------------------------------------------

    def submit(self, entrypoint: str, submission_id: str | None = None, metadata: dict | None = None,
               env_vars: dict | None = None) -> str:
        body: dict = {"entrypoint": entrypoint}
        if env_vars:
            body["runtime_env"] = {"env_vars": env_vars}
        if submission_id:
            body["submission_id"] = submission_id
        if metadata:
            body["metadata"] = metadata
        resp = httpx.post(self.dashboard + "/api/jobs/", json=body, timeout=30, headers=request_headers())
        resp.raise_for_status()
        return resp.json()["submission_id"]

    def status(self, sid: str) -> str:
        return httpx.get(f"{self.dashboard}/api/jobs/{sid}", timeout=10, headers=request_headers()).json()["status"]

    def wait(self, sid: str, statuses: tuple[str, ...] = ("FAILED", "SUCCEEDED", "STOPPED"), timeout_s: float = 90) -> str:
        deadline = time.monotonic() + timeout_s
        status = ""
        while time.monotonic() < deadline:
            status = self.status(sid)
            if status in statuses:
                return status
            time.sleep(0.3)
        raise AssertionError(f"job {sid} still {status} after {timeout_s} s")

    def stop_job(self, sid: str) -> None:
        httpx.post(f"{self.dashboard}/api/jobs/{sid}/stop", timeout=10, headers=request_headers())


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] != "Z"


def disconnect_driver() -> None:
    """Disconnect this process from Ray before its head goes away (a driver left connected would wait for it)."""
    mod = sys.modules.get("ray")
    if mod is not None and getattr(mod, "is_initialized", lambda: False)():
        mod.shutdown()


def slime_job_script(tmp: Path, log_text: str, *, exit_code: int = 1, hold_s: float = 0.0, name: str = "train.py") -> Path:
    """A stand-in for slime's train.py: prints a run's log as the job's output, then exits."""
    log_file = tmp / (name + ".log.txt")
    log_file.write_text(log_text)
    script = tmp / name
    script.write_text(
        "import sys, time\n"
        f"with open({str(log_file)!r}) as fh:\n"
        "    for line in fh:\n"
        "        sys.stdout.write(line)\n"
        "sys.stdout.flush()\n"
        f"time.sleep({hold_s!r})\n"
        f"sys.exit({exit_code})\n"
    )
    return script


def entrypoint(script: Path, flags: list[str]) -> str:
    return " ".join([shlex.quote(sys.executable), shlex.quote(str(script)), *map(shlex.quote, flags)])


def example_flags(example: Path) -> list[str]:
    """The framework flags of an example's command line, cluster paths pointed at the example's copies."""
    from triage.formats.run_args import _after_program, _split

    if not (example / "cmdline.txt").exists():
        return []
    text = (example / "cmdline.txt").read_text().replace("\\\n", " ")
    flags = _after_program(_split(text))
    out = []
    for tok in flags:
        if tok.startswith("/"):
            parts = Path(tok).parts[1:]
            for i in range(len(parts)):
                candidate = example.joinpath(*parts[i:])
                if candidate.exists():
                    tok = str(candidate) + ("/" if tok.endswith("/") else "")
                    break
        out.append(tok)
    return out
