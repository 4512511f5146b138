"""Finding a run's artifacts in its directory, or taking them from its manifest.

The walk is breadth first, so the run root's own files are looked at before anything
deeper, and it is bounded: at most `MAX_RUN_ENTRIES` names in all, `MAX_DEPTH` levels,
`MAX_FILES_PER_KIND` files of one kind (`MAX_LOGS` logs). Whatever a bound cuts, and every
path that is not followed (a symlink leading outside the run and the allowed roots, a
symlink loop, a FIFO, device or socket, a directory the OS will not list), is named in
`Artifacts.skipped`, which the report shows.
"""

from __future__ import annotations

import os
import re
import stat
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from triage import safe_io
from triage.errors import CorruptArtifact, RefusedFile, RunNotFound
from triage.formats.completion_records import is_completion_record
from triage.run.manifest import MANIFEST_NAMES, Manifest

MAX_RUN_ENTRIES = 250_000  # names looked at per run; a 100,000-file run is read whole
MAX_DEPTH = 6
MAX_FILES_PER_KIND = 10_000  # dumps, flight-recorder files, trainer states, checkpoints
# files of any name opened to see whether they hold step records (`*.jsonl`, `*.json` near the root): a run of
# 100,000 such files (benchmarks/fuzz.py's many_files) had spent 12 s opening them
MAX_CONTENT_SNIFFS = 512
MAX_LOGS = 1_000  # each log is scanned in full, so fewer of them
MAX_SKIPPED_NOTES = 20  # skip reasons kept one per line; the rest counted
LOG_SUFFIXES = {".log", ".out", ".err", ".txt"}
LOG_NAMES = {"stdout", "stderr", "output", "log"}
NOT_LOGS = {"latest_checkpointed_iteration.txt", "cmdline.txt", "command.txt", "requirements.txt", "README.txt"}
COMMAND_FILES = ("cmdline.txt", "command.txt", "cmd.txt", "entrypoint.txt")
MARKDOWN_SUFFIXES = {".md", ".markdown"}
# a Markdown file named for a console (`run_terminal.md`, `failed_log_for_sglang.md`, `stdout.md`), not a README
CONSOLE_NAME = re.compile(r"log|terminal|console|output|stdout|stderr|trace|err", re.I)
NOTES_NAME = re.compile(r"^(?:README|CHANGELOG|CHANGES|LICENSE|CONTRIBUTING|NOTES)\b", re.I)
# what a job's console holds that prose does not: a traceback, a level word, a step record, a Ray actor's or a
# rank's prefix, Hydra's failure line
CONSOLE_MARKS = re.compile(
    rb"Traceback \(most recent call last\)|\b(?:ERROR|WARNING|INFO)\b|\bstep[: ]\s*\d+|\{'loss': |"
    rb"Error executing job with overrides|\[rank\d+\]|\(\w+ pid=\d+")
ITER_DIR = re.compile(r"^iter_\d{7}$")
FLIGHT_RECORDER = re.compile(r"(nccl_trace|fr_trace|flight_recorder|flightrecorder)", re.I)
# A JSON file of a trainer's records under another name than trainer_state.json: a script's dump of
# `trainer.state.log_history` (a list of records, kartikmunjal/rlhf-and-reward-modelling-alt's trajectory.json), or an
# object that keeps it under `log_history` / `raw_log_history` (shreyashreddyk/json-extraction-qlora-dpo's
# *_dpo_history.json). Read as `triage run FILE` reads it.
_JSON_RECORD_LIST = re.compile(rb'^\s*\[\s*\{(?P<first>[^{}]{0,4096})\}')
_JSON_HISTORY_KEY = re.compile(rb'"(?:raw_)?log_history"\s*:\s*\[\s*\{')
FILE_KINDS = ("logs", "trainer_states", "rollout_dumps", "train_dumps", "flight_recorder")
DIR_KINDS = ("checkpoints", "hf_checkpoints", "engine_weights")
# found on disk only (the manifest does not name them): metrics beyond the log, argument sources
FOUND_KINDS = ("tensorboard", "wandb_runs", "metric_jsonl", "metric_csv", "launch_scripts", "configs", "python_configs")
METRIC_JSONL = re.compile(r"(log|metric|train)[^/]*\.jsonl$", re.I)
METRIC_CSV = re.compile(r"(log|metric|train|progress|history)[^/]*\.csv$", re.I)  # (a header names its metrics)
CONFIG_SUFFIXES = {".yaml", ".yml"}


@dataclass
class Artifacts:
    logs: list[Path] = field(default_factory=list)
    command_line: Path | None = None
    command: str | None = None
    trainer_states: list[Path] = field(default_factory=list)
    rollout_dumps: list[Path] = field(default_factory=list)
    train_dumps: list[Path] = field(default_factory=list)
    checkpoints: list[Path] = field(default_factory=list)
    hf_checkpoints: list[Path] = field(default_factory=list)
    engine_weights: list[Path] = field(default_factory=list)
    flight_recorder: list[Path] = field(default_factory=list)
    engines: list[str] = field(default_factory=list)
    tensorboard: list[Path] = field(default_factory=list)  # events.out.tfevents.* files
    wandb_runs: list[Path] = field(default_factory=list)  # offline-run-*/run-*.wandb files
    metric_jsonl: list[Path] = field(default_factory=list)  # logging.jsonl, metrics.jsonl, ...
    metric_csv: list[Path] = field(default_factory=list)  # metrics.csv (Lightning's CSVLogger), training_curves.csv
    launch_scripts: list[Path] = field(default_factory=list)  # *.sh near the run root
    configs: list[Path] = field(default_factory=list)  # YAML configs, Hydra's .hydra/config.yaml
    python_configs: list[Path] = field(default_factory=list)  # *.py near the root that build GRPOConfig(...) & co
    skipped: list[str] = field(default_factory=list)  # what was not followed or read, and why, one line each

    def kinds(self) -> dict[str, int]:
        return {
            "logs": len(self.logs),
            "trainer_states": len(self.trainer_states),
            "rollout_dumps": len(self.rollout_dumps),
            "train_dumps": len(self.train_dumps),
            "checkpoints": len(self.checkpoints),
            "hf_checkpoints": len(self.hf_checkpoints),
            "engine_weights": len(self.engine_weights),
            "flight_recorder": len(self.flight_recorder),
            "engines": len(self.engines),
            **{k: len(getattr(self, k)) for k in FOUND_KINDS if getattr(self, k)},
        }

    def empty(self) -> bool:
        return not any(self.kinds().values()) and self.command_line is None and self.command is None

    def skip(self, reason: str) -> None:
        """Record one thing not followed or read (bounded: past the limit only a count is kept)."""
        if reason in self.skipped:
            return
        if len(self.skipped) < MAX_SKIPPED_NOTES:
            self.skipped.append(reason)
            return
        last = self.skipped[-1]
        m = re.match(r"^and (\d+) more paths skipped", last)
        if m:
            self.skipped[-1] = f"and {int(m.group(1)) + 1} more paths skipped"
        else:
            self.skipped.append("and 1 more paths skipped")


def _relative(root: Path, path: Path) -> str:
    try:
        return str(path.relative_to(root)) or "."
    except ValueError:
        return str(path)


def _manifest_paths(root: Path, values: list[str], field_name: str, roots: tuple[Path, ...],
                    found: Artifacts, want_file: bool) -> list[Path]:
    """The manifest's paths that may be read; the others are skipped with their reason."""
    out = []
    for value in values:
        p = Path(value) if os.path.isabs(value) else root / value
        try:
            real = safe_io.resolve(p)
        except FileNotFoundError:
            raise CorruptArtifact(root / MANIFEST_NAMES[0], f"manifest names {field_name} {value!r}, which does not exist") from None
        except RefusedFile as exc:
            found.skip(f"manifest {field_name} {value!r}: {exc.reason}: skipped")
            continue
        reason = safe_io.why_refused(real, roots)
        if reason is None and want_file:
            try:
                mode = os.stat(real).st_mode
            except OSError as exc:
                reason = f"cannot read: {exc.strerror}"
            else:
                if not stat.S_ISREG(mode):
                    reason = f"{safe_io.kind_of(mode)}, not a regular file"
        if reason is not None:
            found.skip(f"manifest {field_name} {value!r}: {reason}: skipped")
            continue
        out.append(real)
    return out


def _is_megatron_checkpoint(here: Path, names: set[str], dirs: set[str]) -> bool:
    """A directory holding the tracker file, or a non-empty `iter_XXXXXXX` directory."""
    if "latest_checkpointed_iteration.txt" in names - dirs:
        return True
    for name in dirs:
        if ITER_DIR.match(name):
            try:
                with os.scandir(here / name) as it:
                    if next(it, None) is not None:
                        return True
            except OSError:
                continue
    return False


def _is_hf_checkpoint(names: set[str]) -> bool:
    return "config.json" in names and any(
        n.endswith(".safetensors") or n == "pytorch_model.bin" or n == "tokenizer_config.json" or n == "model.safetensors.index.json"
        for n in names
    )


def _name_key(name: str) -> tuple[tuple[tuple[int, int, str], ...], str]:
    """A file name's place among its siblings: the part before the first dot compared first, its numbers as numbers.
    `job.log` comes before `job-2.log` (a plain sort puts `-` before `.`: a log's continuation read ahead of it, so
    an error in the continuation was taken as the first, huggingface/trl#3408's two pasted blocks), and
    `worker-2.log` before `worker-10.log`."""
    base, _, rest = name.partition(".")
    parts = tuple((1, int(t), "") if t.isdigit() else (0, 0, t) for t in re.split(r"(\d+)", base) if t)
    return parts, rest


def _dfs_key(root: Path, path: Path) -> tuple[tuple[str, ...], tuple[tuple[tuple[int, int, str], ...], str]]:
    """Order of a top-down walk with sorted names: a directory's files before its subdirectories."""
    rel = path.relative_to(root)
    return rel.parent.parts if rel.parent != Path(".") else (), _name_key(rel.name)


class _Walk:
    def __init__(self, root: Path, roots: tuple[Path, ...]) -> None:
        self.root = root
        self.roots = roots
        self.found = Artifacts()
        self.budget = MAX_RUN_ENTRIES
        self.seen_dirs: set[tuple[int, int]] = set()
        self.seen_files: set[tuple[int, int]] = set()
        self.commands: list[Path] = []
        self.cut: dict[str, int] = {}
        self._contexts: dict[Path, tuple[bool, bool]] = {}
        self.wandb_consoles: list[Path] = []
        self.content_sniffs = MAX_CONTENT_SNIFFS  # files of any name still to open for what they hold

    def rel(self, path: Path) -> str:
        return _relative(self.root, path)

    def _list(self, here: Path) -> list[os.DirEntry] | None:
        try:
            with os.scandir(here) as it:
                entries = []
                for entry in it:
                    if len(entries) >= self.budget:
                        self.found.skip(
                            f"{self.rel(here)}: the walk stopped at {MAX_RUN_ENTRIES} entries in the run "
                            f"(limit MAX_RUN_ENTRIES); the rest of {self.rel(here)} and anything after it was not looked at")
                        self.budget = 0
                        break
                    entries.append(entry)
        except OSError as exc:
            if here == self.root:
                raise RunNotFound(f"cannot read run directory {here}: {exc.strerror or exc}") from None
            self.found.skip(f"{self.rel(here)}: cannot list the directory ({exc.strerror or exc}): skipped")
            return None
        self.budget -= len(entries)
        entries.sort(key=lambda e: e.name)
        return entries

    def _entry_kind(self, entry: os.DirEntry, dir_dev: int) -> tuple[str, Path] | None:
        """('dir' | 'file', path) for an entry that may be followed; None (with a skip note) otherwise.

        Plain files and directories are told by the directory entry's type, without a stat
        call (a 100,000-file run costs no 100,000 stats); symlinks and odd entries are stat'ed.
        """
        path = Path(entry.path)
        try:
            if not entry.is_symlink():
                if entry.is_file(follow_symlinks=False):
                    key = (dir_dev, entry.inode())
                    if key in self.seen_files:
                        return None
                    self.seen_files.add(key)
                    return "file", path
                if entry.is_dir(follow_symlinks=False):
                    return "dir", path
            if entry.is_symlink():
                try:
                    real = safe_io.resolve(path)
                except FileNotFoundError:
                    self.found.skip(f"{self.rel(path)}: a symlink to a path that does not exist: skipped")
                    return None
                except RefusedFile as exc:
                    self.found.skip(f"{self.rel(path)}: {exc.reason}: skipped")
                    return None
                reason = safe_io.why_refused(real, self.roots)
                if reason:
                    self.found.skip(f"{self.rel(path)}: a symlink that {reason}: not followed")
                    return None
                st = os.stat(real)
            else:
                st = entry.stat(follow_symlinks=False)
        except OSError as exc:
            self.found.skip(f"{self.rel(path)}: cannot stat ({exc.strerror or exc}): skipped")
            return None
        key = (st.st_dev, st.st_ino)
        if stat.S_ISDIR(st.st_mode):
            if key in self.seen_dirs:
                if entry.is_symlink():
                    self.found.skip(f"{self.rel(path)}: a symlink to a directory already walked (a loop, or a second name): not followed")
                return None
            return "dir", path
        if stat.S_ISREG(st.st_mode):
            if key in self.seen_files:
                return None  # a second name for a file already found
            self.seen_files.add(key)
            return "file", path
        self.found.skip(f"{self.rel(path)}: {safe_io.kind_of(st.st_mode)}, not a regular file: not read")
        return None

    def run(self) -> Artifacts:
        found = self.found
        try:
            st = os.stat(self.root)
        except OSError as exc:
            raise RunNotFound(f"cannot read run directory {self.root}: {exc.strerror or exc}") from None
        self.seen_dirs.add((st.st_dev, st.st_ino))
        queue: deque[tuple[Path, int]] = deque([(self.root, 0)])
        while queue:
            here, depth = queue.popleft()
            if self.budget <= 0:
                found.skip(f"{self.rel(here)}: not looked at (the walk's limit of {MAX_RUN_ENTRIES} entries was reached)")
                continue
            entries = self._list(here)
            if entries is None:
                continue
            try:
                dir_dev = os.stat(here).st_dev
            except OSError:
                continue
            files: list[Path] = []
            subdirs: list[Path] = []
            for entry in entries:
                kind = self._entry_kind(entry, dir_dev)
                if kind is None:
                    continue
                (subdirs if kind[0] == "dir" else files).append(kind[1])
            names = {e.name for e in entries}
            dir_names = {p.name for p in subdirs}
            descend = self._classify_dir(here, depth, names, dir_names)
            if descend is None:
                continue
            for path in files:
                self._classify_file(here, path)
            if depth + 1 > MAX_DEPTH:
                continue
            for sub in subdirs:
                if sub.name not in descend:
                    continue
                try:
                    sst = os.stat(sub)
                except OSError:
                    continue
                key = (sst.st_dev, sst.st_ino)
                if key in self.seen_dirs:
                    continue
                self.seen_dirs.add(key)
                queue.append((sub, depth + 1))
        if not found.logs:
            found.logs.extend(self.wandb_consoles)
        self._finish()
        return found

    def _classify_dir(self, here: Path, depth: int, names: set[str], dir_names: set[str]) -> set[str] | None:
        """The subdirectories to walk into, or None when this directory's files are not artifacts."""
        found = self.found
        if _is_megatron_checkpoint(here, names, dir_names):
            found.checkpoints.append(here)
            if here != self.root:
                return None  # the checkpoint readers walk inside
            # the run root itself holds a checkpoint: its logs and other folders still count
            return {n for n in dir_names if not ITER_DIR.match(n) and n != "release" and not re.match(r"^mp_rank_\d{2}", n)}
        if here != self.root and (here.name.startswith("iter_") or re.match(r"^mp_rank_\d{2}", here.name)):
            return None
        if _is_hf_checkpoint(names) and "trainer_state.json" not in names:
            found.hf_checkpoints.append(here)
        if here.name in ("engine_weights", "engine_dump") or "engine_weights.json" in names:
            found.engine_weights.append(here)
            if here != self.root:
                return None
        return set(dir_names)

    def _classify_file(self, here: Path, path: Path) -> None:
        found = self.found
        name = path.name
        if name in MANIFEST_NAMES:
            return
        if name == "trainer_state.json":
            found.trainer_states.append(path)
        elif name.endswith(".pt") and here.name == "rollout_data":
            found.rollout_dumps.append(path)
        elif is_completion_record(path):
            # the completions ms-swift, verl and TRL (through W&B) keep of their rollouts
            found.rollout_dumps.append(path)
        elif name.endswith(".pt") and here.name == "train_data":
            found.train_dumps.append(path)
        elif FLIGHT_RECORDER.search(name) or here.name in ("flight_recorder", "fr_dumps"):
            found.flight_recorder.append(path)
        elif name in COMMAND_FILES:
            self.commands.append(path)
        elif self._found_kind(here, path):
            return
        elif name in NOT_LOGS:
            return
        elif (path.suffix in LOG_SUFFIXES or name in LOG_NAMES) and here.name not in ("rollout_result", "trajectory"):
            found.logs.append(path)
        elif self._console_by_content(here, path):
            found.logs.append(path)

    def _dir_context(self, here: Path) -> tuple[bool, bool]:
        """(near the root, inside a W&B run folder) of a directory: worked out once per directory."""
        ctx = self._contexts.get(here)
        if ctx is None:
            near_root = here == self.root or here.parent == self.root
            in_wandb_run = any(re.match(r"^(offline-run-|run-|latest-run$)", part) for part in here.parts[-3:]) \
                and "wandb" in here.parts
            ctx = self._contexts[here] = (near_root, in_wandb_run)
        return ctx

    def _sniffed_head(self, path: Path, size: int) -> bytes | None:
        """The first `size` bytes of a file of any name, opened to see what it holds; None once `MAX_CONTENT_SNIFFS`
        files were (an empty or unreadable file holds nothing)."""
        if self.content_sniffs <= 0:
            return None
        self.content_sniffs -= 1
        try:
            if path.stat().st_size == 0:
                return None
            with safe_io.open_regular(path, self.roots) as fh:
                return fh.read(size)
        except OSError:
            return None

    def _step_records(self, path: Path) -> bool:
        """Whether a JSONL file of another name opens with a record by step (verl's file logger writes
        `{"step": N, "data": {...}}` wherever VERL_FILE_LOGGER_PATH points: agentic-backdoor/agentic-backdoor's
        rl-log/rl-grpo-qwen3-1.7B-clean.jsonl); a data set's rows name no step."""
        from triage.formats.jsonl_metrics import STEP_KEYS

        head = self._sniffed_head(path, 64 << 10)
        if head is None:
            return False
        first = head.lstrip().split(b"\n", 1)[0]
        try:
            row = safe_io.loads_json(first)
        except ValueError:
            return False
        return isinstance(row, dict) and any(isinstance(row.get(k), (int, float)) and not isinstance(row.get(k), bool)
                                             for k in STEP_KEYS)

    def _console_by_content(self, here: Path, path: Path) -> bool:
        """A job's console saved under a name no log suffix marks, near the run's root: Markdown named for a log
        (hebiao064/verl's recipe/spin/failed_log_for_sglang.md, JuncyLu/trl_DAPO's training_logs/…/run_terminal.md)
        or a file without an extension, whose head is text holding a log's marks. A README or notes file is no log:
        its snippets are examples, not the run's output."""
        near_root, _ = self._dir_context(here)
        name = path.name
        if not near_root or (path.suffix not in MARKDOWN_SUFFIXES and path.suffix != "") or name.startswith("."):
            return False
        if path.suffix in MARKDOWN_SUFFIXES and (not CONSOLE_NAME.search(path.stem) or NOTES_NAME.match(name)):
            return False
        head = self._sniffed_head(path, 64 << 10)
        return head is not None and b"\0" not in head and CONSOLE_MARKS.search(head) is not None

    def _json_records(self, path: Path) -> bool:
        """Whether a JSON file holds a trainer's step records (`_JSON_RECORD_LIST`, `_JSON_HISTORY_KEY`): a list whose
        first record names its step, or a `log_history` list; a data set's rows name no step."""
        from triage.formats.jsonl_metrics import STEP_KEYS

        head = self._sniffed_head(path, 256 << 10)
        if head is None:
            return False
        if _JSON_HISTORY_KEY.search(head):
            return True
        m = _JSON_RECORD_LIST.match(head)
        return m is not None and any(re.search(rb'"%s"\s*:\s*-?\d' % re.escape(k.encode()), m.group("first"))
                                     for k in STEP_KEYS)

    def _found_kind(self, here: Path, path: Path) -> bool:
        """Metrics beyond the log and argument sources; True when `path` is one of them."""
        found = self.found
        name = path.name
        near_root, in_wandb_run = self._dir_context(here)
        if name.startswith("events.out.tfevents."):
            found.tensorboard.append(path)
        elif name.endswith(".wandb") and name.startswith("run-"):
            found.wandb_runs.append(path)
        elif in_wandb_run:
            # W&B's own debug logs, config and summary files are not the job's; `files/output.log` is the job's console
            # as W&B captured it (wandb/sdk/lib/redirect.py), read where the run holds no log of its own
            if name == "output.log":
                self.wandb_consoles.append(path)
            return True
        elif METRIC_JSONL.search(name) and here.name not in ("rollout_result", "trajectory", "rollout_data"):
            found.metric_jsonl.append(path)
        elif name.endswith(".jsonl") and near_root and self._step_records(path):
            found.metric_jsonl.append(path)
        elif name == "args.json" and near_root:
            found.configs.append(path)  # ms-swift's arguments (triage/formats/hydra_overrides.read_config_yaml)
        elif name.endswith(".json") and near_root and self._json_records(path):
            found.logs.append(path)
        elif METRIC_CSV.search(name) and here.name not in ("rollout_result", "trajectory", "rollout_data"):
            found.metric_csv.append(path)
        elif name.endswith(".sh") and near_root:
            found.launch_scripts.append(path)
        elif path.suffix in CONFIG_SUFFIXES and (near_root or here.name == ".hydra") and name not in (
                "hydra.yaml", "wandb-metadata.yaml", "config-defaults.yaml") and "wandb" not in here.parts[-2:]:
            found.configs.append(path)
        elif name.endswith(".py") and near_root:
            from triage.formats.python_config import mentions_config

            try:
                with safe_io.open_regular(path, self.roots) as fh:
                    head = fh.read(256 << 10)
            except OSError:
                return False
            if not mentions_config(head):
                return False
            found.python_configs.append(path)
        else:
            return False
        return True

    def _finish(self) -> None:
        """Walk order restored (a top-down walk with sorted names), then each kind bounded."""
        found = self.found
        key = lambda p: _dfs_key(self.root, p)  # noqa: E731
        if self.commands:
            found.command_line = min(self.commands, key=key)
        for attr in (*FILE_KINDS, *DIR_KINDS, *FOUND_KINDS):
            paths = sorted(getattr(found, attr), key=key)
            limit = MAX_LOGS if attr == "logs" else MAX_FILES_PER_KIND
            if len(paths) > limit:
                found.skip(f"{len(paths)} {attr.replace('_', ' ')} found: only the first {limit} were kept "
                           f"(limit {'MAX_LOGS' if attr == 'logs' else 'MAX_FILES_PER_KIND'}); "
                           f"the first not kept is {self.rel(paths[limit])}")
                paths = paths[:limit]
            setattr(found, attr, paths)


def discover(root: Path, manifest: Manifest, roots: tuple[Path, ...] | None = None) -> Artifacts:
    """Artifacts named by the manifest where it names them; otherwise found on disk.

    `roots`: where paths may lead (the run directory and the allowed roots); by default the
    run directory alone.
    """
    roots = roots or (root,)
    found = _Walk(root, roots).run()
    for attr in (*FILE_KINDS, *DIR_KINDS):
        named = getattr(manifest, attr)
        if named:
            setattr(found, attr, _manifest_paths(root, named, attr, roots, found, want_file=attr in FILE_KINDS))
    if manifest.command_line:
        kept = _manifest_paths(root, [manifest.command_line], "command_line", roots, found, want_file=True)
        found.command_line = kept[0] if kept else None
    if manifest.command:
        found.command = manifest.command
    found.engines = list(manifest.engines)
    if found.empty() and not manifest.args:
        skipped = f" (skipped: {'; '.join(found.skipped[:3])})" if found.skipped else ""
        try:
            empty = not any(root.iterdir())
        except OSError as exc:
            raise RunNotFound(f"cannot read run directory {root}: {exc.strerror or exc}") from None
        if empty:
            raise RunNotFound(f"run directory {root} is empty: nothing to triage")
        raise RunNotFound(
            f"nothing to triage in {root}: expected a job log (*.log), trainer_state.json, "
            f"--dump-details dumps, checkpoints, or a triage.yaml manifest naming them{skipped}"
        )
    return found
