"""Real SGLang servers for the integration tier, started and stopped with the shared sglang-cpu kit.

The kit (`../shared/sglang-cpu`, or `$SGLANG_CPU_KIT`) runs the real SGLang 0.5.23 HTTP
server on CPU with tiny random-init models under `~/.cache/sglang-cpu` (or
`$SGLANG_CPU_ROOT`). `serve.sh MODEL PORT` starts one and prints its PID once it answers
/health; `stop.sh PID` ends its whole process group. At most two servers run at a time
(each holds about 1.6 GiB with `--max-total-tokens 16384`), and every server started here
is stopped: at the end of the session, when a third is needed, and at interpreter exit.
"""

from __future__ import annotations

import atexit
import os
import random
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODELS = ("model", "model-alt", "model-llama", "model-llama-alt")
MAX_SERVERS = 2
SERVER_ARGS = ("--max-total-tokens", "16384")


def kit_dir() -> Path:
    env = os.environ.get("SGLANG_CPU_KIT")
    return Path(env) if env else (REPO.parent / "shared" / "sglang-cpu").resolve()


def kit_root() -> Path:
    env = os.environ.get("SGLANG_CPU_ROOT")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sglang-cpu"


def model_dir(name: str) -> Path:
    return kit_root() / name


def not_ready() -> str | None:
    """Why the kit cannot start servers here (None when it can)."""
    kit = kit_dir()
    if not (kit / "serve.sh").is_file():
        return f"no sglang-cpu kit at {kit} (set SGLANG_CPU_KIT)"
    if not (kit_root() / "venv" / "bin" / "python").is_file():
        return f"the kit's venv is missing under {kit_root()} (run {kit}/setup.sh)"
    missing = [m for m in MODELS if not (model_dir(m) / "config.json").is_file()]
    if missing:
        return f"the kit's models {', '.join(missing)} are missing (run {kit}/setup.sh)"
    return None


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port with a few free neighbours (SGLang opens more ports next to the one it serves on)."""
    for _ in range(200):
        port = random.randint(31000, 39000)
        if all(_port_free(port + k) for k in range(8)):
            return port
    raise RuntimeError("no free port range between 31000 and 39000")


@dataclass
class Server:
    model: str
    port: int
    pid: int | None = None
    startup_s: float = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        if self.pid is None:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def stop(self) -> None:
        if self.pid is not None:
            subprocess.run([str(kit_dir() / "stop.sh"), str(self.pid)], capture_output=True, text=True, timeout=60)
            self.pid = None

    def kill(self) -> None:
        """SIGKILL the server's whole process group at once, as a crash or an OOM kill would."""
        if self.pid is not None:
            try:
                os.killpg(self.pid, 9)
            except ProcessLookupError:
                pass
            deadline = time.time() + 30
            while time.time() < deadline and not _port_free(self.port):
                time.sleep(0.2)


def _launch(model: str) -> tuple[Server, subprocess.Popen[str]]:
    server = Server(model, free_port())
    proc = subprocess.Popen([str(kit_dir() / "serve.sh"), str(model_dir(model)), str(server.port), *SERVER_ARGS],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return server, proc


def _wait(server: Server, proc: subprocess.Popen[str], t0: float) -> Server:
    out, err = proc.communicate()
    if proc.returncode != 0 or not out.strip().isdigit():
        raise RuntimeError(f"serve.sh {server.model} {server.port} failed: {err.strip()[-800:]}")
    server.pid = int(out.strip())
    server.startup_s = time.perf_counter() - t0
    return server


class Servers:
    """Servers by model name; at most MAX_SERVERS at once; all stopped by `stop_all`."""

    def __init__(self) -> None:
        self.running: dict[str, Server] = {}
        self.started: list[Server] = []
        atexit.register(self.stop_all)

    def get(self, model: str) -> Server:
        s = self.running.get(model)
        if s is not None and s.alive():
            return s
        self.running.pop(model, None)
        return self.start(model)[0]

    def start(self, *models: str) -> list[Server]:
        """Start servers (in parallel) after making room; returns them in order."""
        while self.running and len(self.running) + len(models) > MAX_SERVERS:
            _name, old = next(iter(self.running.items()))
            old.stop()
            del self.running[_name]
        t0 = time.perf_counter()
        launched = [_launch(m) for m in models]
        out = []
        try:
            for server, proc in launched:
                out.append(_wait(server, proc, t0))
                self.started.append(server)
                self.running[server.model] = server
        except BaseException:
            for server, proc in launched:
                if proc.poll() is None:
                    proc.kill()
                server.stop()
            raise
        return out

    def forget(self, model: str) -> None:
        self.running.pop(model, None)

    def stop_all(self) -> None:
        for s in self.started:
            s.stop()
        self.running.clear()
