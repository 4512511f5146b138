"""The findings cache: a probe's finding reused when the probe, its params and the run's
artifacts are unchanged. Stored in SQLite (one file), so a re-triage reruns nothing and a
Slack retry never reruns a GPU probe.

The key is sha256(probe, params, artifact fingerprint). The fingerprint covers every
artifact file of the run: path, size and mtime, plus a content hash of files under 1 MB.
Only real outcomes are cached: `unavailable` and `error` may be transient (a server
down, a worker killed), and probes that talk to a live engine are never cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path

from triage.executor import Executor
from triage.finding import ERROR, UNAVAILABLE, Finding
from triage.graph import Node
from triage.probe import Probe
from triage.run.run import Run

CHEAP_HASH_BYTES = 1 << 20
MAX_FINGERPRINT_FILES = 20_000
DB_ENV = "TRIAGE_DB"


def default_db_path() -> Path:
    env = os.environ.get(DB_ENV)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "triage" / "triage.db"


def _artifact_files(run: Run) -> list[Path]:
    a = run.artifacts
    roots: list[Path] = [*a.logs, *a.trainer_states, *a.rollout_dumps, *a.train_dumps, *a.checkpoints,
                         *a.hf_checkpoints, *a.engine_weights, *a.flight_recorder]
    if a.command_line:
        roots.append(a.command_line)
    for name in ("triage.yaml", "triage.yml", "triage.json"):
        if (run.root / name).is_file():
            roots.append(run.root / name)
    files: list[Path] = []
    for root in roots:
        if root.is_dir():
            for dirpath, _dirs, names in os.walk(root):
                files.extend(Path(dirpath) / n for n in sorted(names))
                if len(files) > MAX_FINGERPRINT_FILES:
                    return files
        else:
            files.append(root)
    return files


def run_fingerprint(run: Run) -> str:
    """A digest that changes when any artifact of the run changes."""
    h = hashlib.sha256()
    h.update(str(run.root).encode())
    h.update(json.dumps(run.manifest.model_dump(), sort_keys=True, default=str).encode())
    if run.artifacts.command:
        h.update(run.artifacts.command.encode())
    for path in sorted(set(_artifact_files(run))):
        try:
            st = path.stat()
        except OSError:
            continue
        h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
        if st.st_size <= CHEAP_HASH_BYTES:
            try:
                h.update(hashlib.sha256(path.read_bytes()).digest())
            except OSError:
                pass
    return h.hexdigest()


class FindingsCache:
    """SQLite-backed store of findings by key. Safe to share across threads."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS findings (key TEXT PRIMARY KEY, probe TEXT NOT NULL, "
            "finding TEXT NOT NULL, created REAL NOT NULL)"
        )
        self._db.commit()
        self.hits = 0
        self.misses = 0

    @classmethod
    def open(cls, path: str | Path | None = None) -> FindingsCache:
        return cls(Path(path).expanduser() if path else default_db_path())

    def get(self, key: str) -> Finding | None:
        with self._lock:
            row = self._db.execute("SELECT finding FROM findings WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return Finding.model_validate_json(row[0])

    def put(self, key: str, finding: Finding) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO findings (key, probe, finding, created) VALUES (?, ?, ?, ?)",
                (key, finding.probe, finding.model_dump_json(), time.time()),
            )
            self._db.commit()

    def close(self) -> None:
        with self._lock:
            self._db.close()


def cache_key(node: Node, probe_cls: type[Probe], fingerprint: str) -> str:
    params = node.params.model_dump_json() if hasattr(node.params, "model_dump_json") else "{}"
    return hashlib.sha256(f"{probe_cls.name}\0{params}\0{fingerprint}".encode()).hexdigest()


class CachingExecutor:
    """Wraps an executor; answers from the cache where the probe, params and artifacts are unchanged."""

    def __init__(self, inner: Executor, cache: FindingsCache) -> None:
        self.inner = inner
        self.cache = cache
        self._fingerprints: dict[int, str] = {}

    def _fingerprint(self, run: Run) -> str:
        fp = self._fingerprints.get(id(run))
        if fp is None:
            fp = self._fingerprints[id(run)] = run_fingerprint(run)
        return fp

    def run_probe(self, node: Node, probe_cls: type[Probe], run: Run) -> Finding:
        if "engine" in probe_cls.needs or (run.engines and "engine_weights" in probe_cls.needs):
            return self.inner.run_probe(node, probe_cls, run)
        key = cache_key(node, probe_cls, self._fingerprint(run))
        cached = self.cache.get(key)
        if cached is not None and cached.node == node.id:
            return cached.model_copy(update={"evidence": {**cached.evidence, "cached": True}})
        finding = self.inner.run_probe(node, probe_cls, run)
        if finding.outcome not in (UNAVAILABLE, ERROR):
            self.cache.put(key, finding)
        return finding
