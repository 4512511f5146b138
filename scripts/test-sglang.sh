#!/usr/bin/env bash
# `make test-sglang`: the integration tier against real SGLang 0.5.23 servers on CPU.
#
# Sets up the shared sglang-cpu kit if needed (its setup.sh is idempotent: about 2 min the
# first time, about 10 s after), then runs tests/sglang, which start their own servers on
# 127.0.0.1 and stop every one of them. Where the kit is missing or cannot be set up, it
# prints "skipped: <reason>" and exits 0, so CI without the kit passes.
#
#   SGLANG_CPU_KIT   the kit's folder (default: ../shared/sglang-cpu next to the repository)
#   SGLANG_CPU_ROOT  where the kit keeps its venv and models (default: ~/.cache/sglang-cpu)
#   extra arguments go to pytest, e.g. scripts/test-sglang.sh -k live_weights
set -uo pipefail
cd "$(dirname "$0")/.."
REPO="$(pwd)"
KIT="${SGLANG_CPU_KIT:-$(cd "$REPO/.." && pwd)/shared/sglang-cpu}"
PY="${PYTHON:-$REPO/.venv/bin/python}"

skip() { echo "skipped: $*"; exit 0; }

[ -x "$PY" ] || skip "no Python at $PY (run make venv first)"
[ -x "$KIT/setup.sh" ] || skip "no sglang-cpu kit at $KIT (set SGLANG_CPU_KIT to its folder)"

LOG="$(mktemp -t sglang-setup.XXXXXX.log)"
echo "sglang-cpu kit: $KIT (set-up log: $LOG)"
if ! "$KIT/setup.sh" >"$LOG" 2>&1; then
  tail -5 "$LOG" | sed 's/^/  /'
  skip "the sglang-cpu kit could not be set up ($KIT/setup.sh failed; see $LOG)"
fi
rm -f "$LOG"

export TRIAGE_TEST_SGLANG=1 SGLANG_CPU_KIT="$KIT" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec env PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" \
  "$PY" -m pytest tests/sglang -m sglang -q -p no:cacheprovider -rs --timeout 900 "$@"
