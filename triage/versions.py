"""The package versions a run ran with, read from what it left behind.

Sources, most authoritative first (a package read from several keeps the first):

1. installed-package lists kept in the run directory (`pip_freeze.txt`, `pip-list.txt`,
   `conda_list.txt`, `versions.txt`, `requirements*.txt` pins, `pip list --format=json`);
2. the same lists printed into a job log (a launch script that runs `pip list`), and the
   environment reports users paste: `trl env` / `transformers env` (`- TRL version: 0.19.0`),
   verl's `scripts/diagnose.py` (`vllm : 0.24.0`, `Commit Hash : 60577a…`), slime's issue
   template (`- PyTorch version: 2.9.1+cu129`), `python -m sglang.check_env` (`sglang: 0.5.9`);
3. version banners in the logs, each from the framework's own code:
     vLLM      `Initializing a V1 LLM engine (v0.11.0) with config:`   vllm/v1/engine/core.py
               `Initializing an LLM engine (v0.6.3.post1) with config:` vllm/engine/llm_engine.py
               `vLLM API server version 0.10.0`              vllm/entrypoints/openai/api_server.py
     DeepSpeed `DeepSpeed info: version=0.14.4, git-hash=…`  deepspeed/__init__.py (initialize)
     torch     `PyTorch version 2.6.0 available.`            huggingface/datasets src/datasets/config.py
     Ray       `ray, version 2.40.0` (`ray --version`, click) python/ray/scripts/scripts.py;
               `RayContext(… python_version='3.10.12', ray_version='2.40.0' …)` (a printed ray.init())
     pip       `pip install "sglang[all]==0.4.6.post1"` echoed by a launch script (`set -x`)
     Python    `3.10.12 (main, Nov 20 2023, 15:14:05) [GCC 11.4.0]` (a printed `sys.version`)
   SGLang's server, Megatron-core and Transformer Engine print no version banner of their
   own: their versions come from package lists, environment reports and image tags;
4. container image tags: `slimerl/sglang:v0.5.12.post1-cu129` (THUDM/slime#2091),
   `lmsysorg/sglang:v0.4.6.post1-cu124`, `vllm/vllm-openai:v0.8.5`, `slimerl/slime:v0.2.1`, and
   verl's composite tags `verlai/verl:vemlp-th2.4.0-cu124-vllm0.6.3-ray2.10-te1.7-v0.0.3`
   (verl-project/verl#46), one version per component.

A framework's commit id is kept where a source names one (`-e git+…@<sha>#egg=slime`,
`name @ git+…@<sha>`, verl's `Commit Hash`). Versions are normalised with `packaging`
(canonical names, `packaging.version.Version`); a version string `packaging` cannot read
is kept as text and never matched against a range.

Only the first `LOG_HEAD_BYTES` of each log are read: every source above prints at start-up,
and a 10 GB log is never read whole for them. Within that head, the lines are found by a
search for a few needles over the bytes (`log_regions`), so only lines that can hold a
version are decoded and parsed.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

if TYPE_CHECKING:
    from triage.run.run import Run

# Version banners are printed at start-up; a run's first 32 MiB of log hold every one the
# example and field logs show (the engines' launch lines come within the first minutes).
LOG_HEAD_BYTES = 32 << 20
MAX_VERSION_FILE_BYTES = 8 << 20
MAX_LINE_CHARS = 4096
MAX_CANDIDATE_LINES = 20_000  # per log: more lines holding a needle than this are not read
BLOCK_LINES = 400  # lines read after a package table's or report block's header
MAX_WALK_ENTRIES = 50_000  # directory entries looked at for package lists (the run directory and one level down)

# File names of installed-package lists kept beside a run (matched case-insensitively, depth <= 2).
VERSION_FILE = re.compile(
    r"^(?:pip[-_]?(?:freeze|list)|conda[-_]?list|requirements|packages|versions?|env(?:ironment)?[-_]?info|"
    r"installed[-_]?packages)[\w.-]*\.(?:txt|json|lock|log|out)$",
    re.I,
)
PINNED_ONLY = re.compile(r"^requirements", re.I)  # a requirements file says what was asked for: `==` pins only

# Source kinds, in order of authority.
SOURCE_RANK = {"package list": 0, "environment report": 1, "banner": 2, "install command": 2, "image tag": 3}

# conda / pip spellings of one package -> the name the known-bug index uses
ALIASES = {
    "pytorch": "torch",
    "megatron-core": "megatron-core",
    "megatron_core": "megatron-core",
    "transformer-engine-cu12": "transformer-engine",
    "transformer-engine-cu13": "transformer-engine",
    "transformer-engine-torch": "transformer-engine",
    "ray-core": "ray",
    "ray-default": "ray",
    "slime-rl": "slime",
}
# names the environment reports use, lower-cased, -> package
REPORT_NAMES = {
    "pytorch": "torch", "torch": "torch", "transformers": "transformers", "trl": "trl", "accelerate": "accelerate",
    "deepspeed": "deepspeed", "peft": "peft", "vllm": "vllm", "sglang": "sglang", "ray": "ray", "python": "python",
    "datasets": "datasets", "flash-attn": "flash-attn", "flash_attn": "flash-attn", "megatron-lm": "megatron-lm",
    "megatron-core": "megatron-core", "megatron core": "megatron-core", "mcore": "megatron-core",
    "transformer engine": "transformer-engine", "transformer-engine": "transformer-engine",
    "transformer_engine": "transformer-engine", "te": "transformer-engine", "slime": "slime", "miles": "miles",
    "verl": "verl", "openrlhf": "openrlhf", "liger-kernel": "liger-kernel", "torch_memory_saver": "torch-memory-saver",
    "torch-memory-saver": "torch-memory-saver", "sgl-kernel": "sgl-kernel", "sgl_kernel": "sgl-kernel",
    "flashinfer": "flashinfer-python", "flashinfer-python": "flashinfer-python", "xformers": "xformers",
    "nccl": "nvidia-nccl-cu12",
}

_RAY_PREFIX = re.compile(r"^\((?:[A-Za-z_][\w.-]*(?: pid=\d+)?(?:, ip=[^)\s]+)?|pid=\d+(?:, ip=[^)\s]+)?)\) ?")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_VER = r"v?\d[\w.+!-]*"

# package lists
_FREEZE = re.compile(rf"^(?P<name>{_NAME})(?:\[[^\]]*\])?\s*===?\s*(?P<ver>[^\s;#,]+)\s*(?:[;#].*)?$")
_EDITABLE = re.compile(r"^-e\s+git\+\S+@(?P<sha>[0-9a-f]{7,40})#egg=(?P<name>[\w.-]+)")
_DIRECT_URL = re.compile(rf"^(?P<name>{_NAME})\s+@\s+git\+\S+@(?P<sha>[0-9a-f]{{7,40}})")
_PIP_LIST_HEAD = re.compile(r"^Package\s+Version(?:\s+.*)?$")
_PIP_LIST_RULE = re.compile(r"^-{3,}\s+-{3,}")
_PIP_LIST_ROW = re.compile(rf"^(?P<name>{_NAME})\s+(?P<ver>\d[\w.+!-]*)(?:\s+.*)?$")
_CONDA_HEAD = re.compile(r"^#\s*packages in environment at")
_CONDA_ROW = re.compile(rf"^(?P<name>{_NAME})\s+(?P<ver>\d[\w.+!-]*)\s+\S+(?:\s+\S+)?\s*$")
# environment reports
_HF_ENV = re.compile(  # `- TRL version: 0.19.0`, "- `transformers` version: 4.46.0", `- PyTorch version (GPU?): 2.4.0+cu121 (True)`
    r"^\s*-\s+`?(?P<name>[A-Za-z][\w .-]*?)`?\s+version(?:\s*\([^)]*\))?\s*:\s*(?P<ver>v?\d[\w.+!-]*)"
)
_KEY_VALUE = re.compile(r"^\s*(?P<name>[A-Za-z][\w-]*)\s*:\s*(?P<ver>v?\d[\w.+!-]*)\s*\.?\s*$")  # `vllm : 0.24.0`
_VERL_VERSION = re.compile(r"^\s*Version\s*:\s*(?P<ver>\d[\w.+!-]*)\s*$")
# `pip show NAME`: `Name: sglang` then `Version: 0.5.7` on the next line (pypa/pip src/pip/_internal/commands/show.py)
_PIP_SHOW_NAME = re.compile(rf"^Name:\s*(?P<name>{_NAME})\s*$")
_PIP_SHOW_VERSION = re.compile(r"^Version:\s*(?P<ver>v?\d[\w.+!-]*)\s*$")
_COMMIT = re.compile(r"^\s*(?:(?P<name>[A-Za-z][\w-]*)\s+)?(?:Commit Hash|commit|git[- ]hash)\s*[:=]\s*(?P<sha>[0-9a-f]{7,40})\b", re.I)
_BLOCK_HEAD = re.compile(r"-{3,}\s*(?P<title>[\w ]+?)\s*-{3,}")
# banners
_VLLM_ENGINE = re.compile(r"Initializing an? (?:V\d )?LLM engine \(v(?P<ver>[^)\s]+)\) with config")
_VLLM_API = re.compile(r"vLLM API server version (?P<ver>\d[\w.+!-]*)")
_DEEPSPEED = re.compile(r"DeepSpeed info: version=(?P<ver>[^,\s]+)")
_TORCH_AVAILABLE = re.compile(r"PyTorch version (?P<ver>\d[\w.+!-]*) available")
_RAY_CLI = re.compile(r"\bray, version (?P<ver>\d[\w.+!-]*)")
_RAY_CONTEXT = re.compile(r"\b(?P<key>ray_version|python_version)='(?P<ver>\d[\w.+!-]*)'")
# unsloth's statistics banner at model load (unslothai/unsloth unsloth/models/_utils.py): `Unsloth 2025.9.6: Fast Qwen3
# patching. Transformers: 4.55.4.`, two lines under it `Torch: 2.8.0+cu128. CUDA: 12.0. CUDA Toolkit: 12.8. Triton: 3.4.0`
_UNSLOTH = re.compile(r"\bUnsloth (?P<ver>\d{4}\.\d+\.\d+): Fast \w+ patching\. Transformers: (?P<tf>\d[\w.+!-]*?)\.?\s*$")
_UNSLOTH_TORCH = re.compile(r"\bTorch: (?P<torch>\d[\w.+!-]*?)\. CUDA: [\d.]+\. CUDA Toolkit: [\d.]+\. Triton: (?P<triton>\d[\w.+!-]*)")
_SYS_VERSION = re.compile(r"^(?:Python\s+)?(?P<ver>3\.\d+\.\d+)\s+\((?:main|default|tags/[^,)]*)?[^)]*\)\s*\[(?:GCC|Clang|MSC)")
_PIP_INSTALL = re.compile(r"\bpip3?\s+install\b(?P<rest>.*)$")
_PIN = re.compile(rf"""["']?(?P<name>{_NAME})(?:\[[^\]]*\])?==(?P<ver>[^\s"';,]+)""")
# image tags
_IMAGE = re.compile(
    r"\b(?P<repo>(?:[\w.-]+(?::\d+)?/)?(?:slimerl|lmsysorg|vllm|verlai|radixark|rlsys|hiyouga|openrlhf)/[\w.-]+)"
    r":(?P<tag>[\w.+-]+)"
)
_IMAGE_PACKAGES = {"sglang": "sglang", "vllm-openai": "vllm", "vllm": "vllm", "slime": "slime", "miles": "miles",
                   "verl": "verl", "openrlhf": "openrlhf"}
_TAG_COMPONENT = re.compile(
    r"(?:^|[-_])(?P<comp>verl|sglang|vllm|mcore|te|th|torch|ray|trl|deepspeed)(?P<ver>\d+(?:\.\d+)*(?:\.?post\d+|rc\d+)?)"
    r"(?=$|[-_])"
)
_TAG_COMPONENTS = {"verl": "verl", "sglang": "sglang", "vllm": "vllm", "mcore": "megatron-core", "te": "transformer-engine",
                   "th": "torch", "torch": "torch", "ray": "ray", "trl": "trl", "deepspeed": "deepspeed"}

# A `pip list` row pasted without its `Package  Version` header (modelscope/ms-swift#6704: `ms_swift
# 3.11.0.dev0`, `trl   0.24.0`): read for the packages the catalog's version causes name, where the
# name alone could be anything else.
_BARE_ROW = re.compile(r"^(?P<name>[A-Za-z][\w.-]*)\s{2,}(?P<ver>v?\d[\w.+!-]*)\s*$")  # (`ms_swift`: `_` too)
BARE_ROW_PACKAGES = frozenset({
    "torch", "transformers", "trl", "vllm", "sglang", "sgl-kernel", "deepspeed", "megatron-core", "transformer-engine",
    "flash-attn", "flashinfer-python", "ms-swift", "verl", "openrlhf", "ray", "peft", "accelerate", "datasets",
    "tokenizers", "xformers", "bitsandbytes", "liger-kernel", "triton", "nvidia-nccl-cu12", "torch-memory-saver",
})
# What a log line holding a version contains somewhere (bytes, case-sensitive): only lines
# with one of these are decoded and parsed (`log_regions`).
_NEEDLES: tuple[bytes, ...] = (
    b"==", b"LLM engine (v", b"API server version", b"DeepSpeed info", b"PyTorch version", b"ray, version",
    b"_version='", b" version:", b" version (", b"Package", b"# packages in environment", b"egg=", b"@ git+", b"ommit", b"[GCC",
    b"[Clang", b"Info---", b"slimerl/", b"lmsysorg/", b"vllm/vllm", b"verlai/", b"radixark/", b"rlsys/", b"hiyouga/",
    b"openrlhf/", b"Name: ", b"Triton: ",
    # the bare rows' names, padded as `pip list` pads them (`ms_swift` as pip prints an underscored name)
    *sorted({f"{spelled}  ".encode() for name in BARE_ROW_PACKAGES for spelled in (name, name.replace("-", "_"))}),
)
try:  # optional: one multi-needle pass instead of one `bytes.find` pass per needle
    import ahocorasick_rs as _ahocorasick

    _AUTOMATON = _ahocorasick.BytesAhoCorasick(list(_NEEDLES))
except ImportError:  # pragma: no cover - depends on the environment
    _AUTOMATON = None
WINDOW_BYTES = 4 << 20
_BLOCK_START = re.compile(r"^Package\s+Version|^#\s*packages in environment|-{3,}\s*[\w ]*Info\s*-{3,}|^Name:\s*\S+\s*$")
# Cheap test that a line may hold any of the above (the rest are only counted).
_HINT = re.compile(
    r"==|LLM engine \(v|API server version|DeepSpeed info|PyTorch version|ray, version|ray_version=|"
    r"version|Version|Package|# packages in environment|egg=|@ git\+|[Cc]ommit|[Hh]ash|\[GCC|\[Clang|"
    r"(?:slimerl|lmsysorg|vllm|verlai|radixark|rlsys|hiyouga|openrlhf)/|^\s*[\w-]+\s*:\s*v?\d|^Name:|"
    r"^[A-Za-z][\w.-]*\s{2,}v?\d|Triton: "
)


@dataclass(frozen=True)
class VersionRecord:
    """One package's version, and where it was read."""

    package: str  # canonical name (packaging.utils.canonicalize_name, then ALIASES)
    version: str  # as read, a leading "v" dropped
    where: str  # file:line
    source: str  # "package list", "environment report", "banner", "install command", "image tag"
    detail: str  # which wording: "pip freeze", "vLLM engine banner", "image slimerl/sglang:v0.5.12.post1-cu129", ...
    commit: str | None = None

    @property
    def parsed(self) -> Version | None:
        try:
            return Version(self.version)
        except InvalidVersion:
            return None

    def as_dict(self) -> dict[str, str | None]:
        return {"package": self.package, "version": self.version, "where": self.where, "source": self.source,
                "detail": self.detail, "commit": self.commit}


@dataclass
class RunVersions(Mapping[str, VersionRecord]):
    """{package: VersionRecord} for one run, with what was looked at and what disagreed."""

    records: dict[str, VersionRecord] = field(default_factory=dict)
    conflicts: list[tuple[VersionRecord, VersionRecord]] = field(default_factory=list)  # (kept, other)
    version_files: list[str] = field(default_factory=list)
    logs_read: int = 0

    def __getitem__(self, package: str) -> VersionRecord:
        return self.records[normal_name(package)]

    def __iter__(self) -> Iterator[str]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def get_version(self, package: str) -> str | None:
        rec = self.records.get(normal_name(package))
        return rec.version if rec else None

    def as_dict(self) -> dict[str, str]:
        """{package: version}."""
        return {name: rec.version or f"git {rec.commit[:12]}" for name, rec in sorted(self.records.items())
                if rec.version or rec.commit}

    def add(self, rec: VersionRecord) -> None:
        have = self.records.get(rec.package)
        if have is None:
            self.records[rec.package] = rec
            return
        if not have.version or not rec.version or same_version(have.version, rec.version):
            # the same version (or a commit id alone): keep the more authoritative record, with any commit id
            keep = min([r for r in (have, rec) if r.version] or [have], key=lambda r: SOURCE_RANK[r.source])
            other = rec if keep is have else have
            self.records[rec.package] = VersionRecord(keep.package, keep.version, keep.where, keep.source, keep.detail,
                                                      keep.commit or other.commit)
            return
        if SOURCE_RANK[rec.source] < SOURCE_RANK[have.source]:
            self.records[rec.package] = rec
            have, rec = rec, have
        if not same_version(have.version, rec.version):
            self.conflicts.append((have, rec))

    def note(self) -> str:
        """One line for the report's coverage: what was read, or that nothing was."""
        looked = (f"{len(self.version_files)} package list{'s' if len(self.version_files) != 1 else ''}"
                  if self.version_files else "no pip/conda list in the run directory")
        logs = f"the first {LOG_HEAD_BYTES >> 20} MiB of {self.logs_read} log{'s' if self.logs_read != 1 else ''}"
        if not self.records:
            return (f"no version information: {looked}, no version banner, environment report or image tag in {logs} "
                    "(keep `pip freeze > pip_freeze.txt` in the run directory)")
        return f"{len(self.records)} package versions read ({looked}; {logs})"


def versions_note(run: Run) -> str:
    """The coverage line for a run's versions ("no version information: …" when none)."""
    return run.versions.note()


def normal_name(name: str) -> str:
    canon = canonicalize_name(name.strip())
    return ALIASES.get(canon, ALIASES.get(name.strip().lower(), canon))


def same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def clean_version(raw: str) -> str:
    v = raw.strip().rstrip(".,;)")
    return v[1:] if v[:1] in ("v", "V") and v[1:2].isdigit() else v


# --- reading ------------------------------------------------------------------------------


def read_versions(run: Run) -> RunVersions:
    """Every version the run's files and log heads name."""
    out = RunVersions()
    files = version_files(run.root)
    for path in files:
        out.version_files.append(str(path))
        _read_version_file(path, out)
    seen = {p.resolve() for p in files}
    for path in run.artifacts.logs:
        if Path(path).resolve() in seen:
            continue
        out.logs_read += 1
        for region in log_regions(Path(path), LOG_HEAD_BYTES):
            _scan(path, iter(region), out, in_log=True)
    if run.artifacts.command:
        _scan(Path("triage.yaml"), enumerate(run.artifacts.command.splitlines(), 1), out, in_log=True)
    return out


def version_files(root: Path, depth: int = 2) -> list[Path]:
    """Package-list files in the run directory and one level below (names matched before any stat)."""
    found: list[Path] = []
    seen = 0

    def walk(d: Path, level: int) -> None:
        nonlocal seen
        try:
            entries = list(os.scandir(d))
        except OSError:
            return
        seen += len(entries)
        for e in sorted((e for e in entries if VERSION_FILE.match(e.name)), key=lambda e: e.name):
            try:
                if e.is_file(follow_symlinks=False):
                    found.append(Path(e.path))
            except OSError:
                continue
        if level >= depth or seen > MAX_WALK_ENTRIES:
            return
        for e in sorted((e for e in entries if not e.name.startswith((".", "iter_"))), key=lambda e: e.name):
            try:
                if e.is_dir(follow_symlinks=False):
                    walk(Path(e.path), level + 1)
            except OSError:
                continue

    walk(root, 1)
    return found


def head_bytes(path: Path, limit: int) -> bytes:
    """The first `limit` bytes of a text or gzip log (a notebook's stream records: their text), cut after its last
    whole line; b"" when unreadable.

    Opened through `safe_io.open_regular`: only regular files inside the run's allowed roots.
    """
    from triage import safe_io

    try:
        from triage.formats.notebook_stream import MAGIC, NotebookStream, is_notebook_stream

        with safe_io.open_regular(path) as fh:
            magic = fh.read(len(MAGIC) + 3)
            fh.seek(0)
            if magic[:2] == b"\x1f\x8b":
                data = gzip.GzipFile(fileobj=fh).read(limit)
            elif is_notebook_stream(magic):
                data = NotebookStream(fh).read(limit)  # the text of a notebook's stream records
            else:
                data = fh.read(limit)
    except (OSError, EOFError, zlib.error):
        return b""
    if len(data) >= limit:
        data = data[: data.rfind(b"\n") + 1] or data  # a line cut at the limit is not read
    return data


def log_regions(path: Path, limit: int) -> Iterator[list[tuple[int, str]]]:
    """The lines of a log's head that may name a version, as runs of (line number, text).

    Each needle is searched over the whole head in C (`bytes.find`); only the lines that hold
    one are decoded. A table or block header (`Package  Version`, `# packages in environment`,
    diagnose.py's `---Pip Info---`) brings the lines after it, up to `BLOCK_LINES`.
    """
    data = head_bytes(path, limit)
    if not data:
        return
    starts: set[int] = set()
    if _AUTOMATON is not None:  # one pass for every needle, a window at a time
        view = memoryview(data)
        for w in range(0, len(data), WINDOW_BYTES):
            for _k, a, _b in _AUTOMATON.find_matches_as_indexes(view[w: w + WINDOW_BYTES + 64]):
                if a < WINDOW_BYTES:
                    starts.add(data.rfind(b"\n", 0, w + a) + 1)
            if len(starts) >= MAX_CANDIDATE_LINES:
                break
    else:
        for needle in _NEEDLES:
            pos = data.find(needle)
            while pos != -1 and len(starts) < MAX_CANDIDATE_LINES:
                starts.add(data.rfind(b"\n", 0, pos) + 1)
                nxt = data.find(b"\n", pos)
                if nxt == -1:
                    break
                pos = data.find(needle, nxt + 1)
    line_no, counted_to, covered_to = 1, 0, -1
    for start in sorted(starts):
        if start < covered_to:
            continue
        line_no += data.count(b"\n", counted_to, start)
        counted_to = start
        region: list[tuple[int, str]] = []
        pos, n = start, line_no
        end = data.find(b"\n", pos)
        first = data[pos: end if end != -1 else len(data)].decode("utf-8", "replace")[:MAX_LINE_CHARS]
        region.append((n, first))
        if _BLOCK_START.search(first):
            for _ in range(BLOCK_LINES):
                if end == -1:
                    break
                pos, n = end + 1, n + 1
                end = data.find(b"\n", pos)
                region.append((n, data[pos: end if end != -1 else len(data)].decode("utf-8", "replace")[:MAX_LINE_CHARS]))
        covered_to = (end + 1) if end != -1 else len(data)
        line_no, counted_to = n, pos
        yield region


def head_lines(path: Path, limit: int) -> Iterator[tuple[int, str]]:
    """(line number, text) for every line of the first `limit` bytes of a text or gzip log."""
    text = head_bytes(path, limit).decode("utf-8", "replace")
    for n, line in enumerate(text.splitlines(), 1):
        yield n, line[:MAX_LINE_CHARS]


def _read_version_file(path: Path, out: RunVersions) -> None:
    from triage import safe_io

    try:
        text = safe_io.read_bytes(path, MAX_VERSION_FILE_BYTES, "package list").decode("utf-8", "replace")
    except OSError:  # refused (too large, not a regular file, outside the run) or unreadable: not a source
        return
    if path.suffix == ".json" or text.lstrip().startswith("["):
        try:
            data = safe_io.loads_json(text)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, list):  # pip list --format=json
            for i, item in enumerate(data, 1):
                if isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get("version"), str):
                    out.add(VersionRecord(normal_name(item["name"]), clean_version(item["version"]), f"{path}:{i}",
                                          "package list", "pip list --format=json"))
            return
    _scan(path, enumerate(text.splitlines(), 1), out, in_log=False, pins_only=bool(PINNED_ONLY.match(path.name)))


def _scan(path: Path | str, lines: Iterator[tuple[int, str]] | enumerate, out: RunVersions, *, in_log: bool,
          pins_only: bool = False) -> None:
    """Read one file's lines: package lists, environment reports, banners, image tags."""
    table: str | None = None  # "pip list" | "conda list" while inside one
    block: str | None = None  # the title of a diagnose.py block (`Pip Info`, `verl Info`)
    list_source = "environment report" if in_log else "package list"
    shown: str | None = None  # the package of a `pip show` block until its `Version:` line
    for n, raw in lines:
        where = f"{path}:{n}"
        line = _RAY_PREFIX.sub("", _ANSI.sub("", raw)).rstrip()
        if shown is not None:
            m = _PIP_SHOW_VERSION.match(line)
            if m:
                out.add(VersionRecord(normal_name(shown), clean_version(m["ver"]), where, list_source, "pip show"))
                shown = None
                continue
            if not line.startswith(("Summary:", "Home-page:", "Author", "License", "Metadata-Version:")):
                shown = None
        if line.startswith("Name:") and (m := _PIP_SHOW_NAME.match(line)):
            shown = m["name"]
            continue
        if table is not None:
            if table == "pip list" and _PIP_LIST_RULE.match(line):
                continue
            m = (_PIP_LIST_ROW if table == "pip list" else _CONDA_ROW).match(line)
            if m and not line.startswith("#"):
                out.add(VersionRecord(normal_name(m["name"]), clean_version(m["ver"]), where, list_source, table))
                continue
            if table == "conda list" and line.startswith("#"):
                continue
            table = None
        if "---" in line:
            m = _BLOCK_HEAD.search(line)
            if m and m["title"].strip():
                block = m["title"].strip().lower()
                continue
        if not _HINT.search(line):
            continue
        if _PIP_LIST_HEAD.match(line):
            table = "pip list"
            continue
        if _CONDA_HEAD.match(line):
            table = "conda list"
            continue
        if _line(line, where, out, in_log=in_log, pins_only=pins_only, block=block, list_source=list_source):
            continue
        m = _BARE_ROW.match(line)
        if m and not pins_only and (name := normal_name(m["name"])) in BARE_ROW_PACKAGES:
            out.add(VersionRecord(name, clean_version(m["ver"]), where, list_source, "pip list row"))


def _line(line: str, where: str, out: RunVersions, *, in_log: bool, pins_only: bool, block: str | None,
          list_source: str) -> bool:
    stripped = line.strip()
    m = _EDITABLE.match(stripped)
    if m:
        out.add(VersionRecord(normal_name(m["name"]), "", where, list_source, "editable install", m["sha"]))
        return True
    m = _DIRECT_URL.match(stripped)
    if m:
        out.add(VersionRecord(normal_name(m["name"]), "", where, list_source, "direct URL install", m["sha"]))
        return True
    m = _FREEZE.match(stripped)
    if m:
        out.add(VersionRecord(normal_name(m["name"]), clean_version(m["ver"]), where, list_source,
                              "requirements pin" if pins_only else "pip freeze"))
        return True
    if pins_only:
        return False
    m = _HF_ENV.match(line)
    if m:
        name = REPORT_NAMES.get(m["name"].strip().lower().removesuffix(" version").strip())
        if name:
            out.add(VersionRecord(name, clean_version(m["ver"]), where, "environment report", "environment report"))
            return True
    if block and "verl" in block:
        m = _VERL_VERSION.match(line)
        if m:
            out.add(VersionRecord("verl", clean_version(m["ver"]), where, "environment report", "verl diagnose.py"))
            return True
    m = _COMMIT.match(line)
    if m:
        name = (m["name"] or (block or "").replace(" info", "").strip()).lower()
        if name in REPORT_NAMES and name not in ("python",):
            pkg = REPORT_NAMES[name]
            have = out.records.get(pkg)
            out.add(VersionRecord(pkg, have.version if have else "", where, "environment report", "commit id", m["sha"]))
            return True
    m = _KEY_VALUE.match(line) if (block or not in_log) else None
    if m and m["name"].lower() in REPORT_NAMES and m["name"].lower() not in ("te", "mcore"):
        out.add(VersionRecord(REPORT_NAMES[m["name"].lower()], clean_version(m["ver"]), where, "environment report",
                              "package report (`name: version`)"))
        return True
    found = False
    for rx, pkg, detail in ((_VLLM_ENGINE, "vllm", "vLLM engine banner"), (_VLLM_API, "vllm", "vLLM API server banner"),
                            (_DEEPSPEED, "deepspeed", "DeepSpeed info banner"),
                            (_TORCH_AVAILABLE, "torch", "`PyTorch version … available` (datasets)"),
                            (_RAY_CLI, "ray", "`ray --version`")):
        m = rx.search(line)
        if m:
            out.add(VersionRecord(pkg, clean_version(m["ver"]), where, "banner", detail))
            found = True
    if "Unsloth " in line and (m := _UNSLOTH.search(line)):
        out.add(VersionRecord("unsloth", clean_version(m["ver"]), where, "banner", "unsloth's statistics banner"))
        out.add(VersionRecord("transformers", clean_version(m["tf"]), where, "banner", "unsloth's statistics banner"))
        found = True
    if "Triton: " in line and (m := _UNSLOTH_TORCH.search(line)):
        out.add(VersionRecord("torch", clean_version(m["torch"]), where, "banner", "unsloth's statistics banner"))
        out.add(VersionRecord("triton", clean_version(m["triton"]), where, "banner", "unsloth's statistics banner"))
        found = True
    for m in _RAY_CONTEXT.finditer(line):
        pkg = "ray" if m["key"] == "ray_version" else "python"
        out.add(VersionRecord(pkg, clean_version(m["ver"]), where, "banner", "RayContext"))
        found = True
    m = _SYS_VERSION.match(stripped)
    if m:
        out.add(VersionRecord("python", m["ver"], where, "banner", "sys.version"))
        found = True
    m = _PIP_INSTALL.search(line)
    if m and in_log:
        for pin in _PIN.finditer(m["rest"]):
            out.add(VersionRecord(normal_name(pin["name"]), clean_version(pin["ver"]), where, "install command", "pip install pin"))
            found = True
    for m in _IMAGE.finditer(line):
        found |= _image(m["repo"], m["tag"], where, out)
    return found


def _image(repo: str, tag: str, where: str, out: RunVersions) -> bool:
    image = f"{repo}:{tag}"
    name = repo.rsplit("/", 1)[-1].lower()
    found = False
    if name == "verl":
        for c in _TAG_COMPONENT.finditer(tag):
            out.add(VersionRecord(_TAG_COMPONENTS[c["comp"]], c["ver"], where, "image tag", f"image {image}"))
            found = True
        return found
    pkg = _IMAGE_PACKAGES.get(name)
    m = re.match(r"v?(\d+(?:\.\d+)*(?:\.?post\d+|rc\d+)?)", tag)
    if pkg and m:
        out.add(VersionRecord(pkg, m.group(1), where, "image tag", f"image {image}"))
        found = True
    return found
