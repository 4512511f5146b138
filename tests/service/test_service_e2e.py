"""End to end with the real triage (`triage.api.triage`, the built-in playbooks and probes)."""

from __future__ import annotations

import argparse
import json

import numpy as np
from PIL import Image

import service_runs as runs
from service_support import CHANNEL
from triage.plots import ONSET_COLOR
from triage.postmortem import add_postmortem_parser
from triage.service.testing import slash_command_body, wait_for


def _report(slack, anchor_ts: str) -> dict:
    return wait_for(lambda: next((m for m in slack.thread(anchor_ts)
                                  if (m.get("metadata") or {}).get("event_payload", {}).get("kind") == "report"), None),
                    timeout=30)


def test_slack_command_gets_the_real_verdicts(live, slack, runs_root):
    runs.slime_oom_run(runs_root / "oom7")
    runs.trl_run(runs_root / "grpo-zero", [0.0] * 30)
    server = live(triage_fn=None)
    for ref in ("oom7", "grpo-zero"):
        assert server.command(slash_command_body(ref)).status_code == 200
    anchors = wait_for(lambda: len(slack.top_level(CHANNEL)) == 2 and slack.top_level(CHANNEL))
    verdicts = {}
    for anchor in anchors:
        report = _report(slack, anchor["ts"])
        ref = anchor["text"].split("`")[1]
        verdicts[ref] = json.dumps(report["blocks"])
    assert "`memory.max_tokens_per_gpu`" in verdicts["oom7"]
    assert "`reward.broken_fn`" in verdicts["grpo-zero"]


def test_postmortem_command_with_the_real_triage(tmp_path, runs_root, capsys):
    runs.nan_grad_run(runs_root / "nan-18", onset=18)
    parser = argparse.ArgumentParser()
    add_postmortem_parser(parser.add_subparsers())
    out = tmp_path / "doc" / "nan-18.md"
    ns = parser.parse_args(["postmortem", "nan-18", "--runs-root", str(runs_root), "-o", str(out)])
    assert ns.func(ns) == 0, capsys.readouterr().err
    md = out.read_text()
    assert "`numerics.nan_grad`" in md and "- Anomaly onset: step 18 in `hf:grad_norm`" in md
    png = out.parent / "nan-18-grad_norm.png"
    img = np.asarray(Image.open(png).convert("RGB"))
    assert img.shape == (300, 800, 3)
    onset_rgb = np.array([int(ONSET_COLOR[i:i + 2], 16) for i in (1, 3, 5)])
    magenta = np.abs(img.astype(int) - onset_rgb).sum(axis=2) < 40
    assert magenta[:, magenta.any(axis=0)].sum() > 100  # the onset line is drawn, top to bottom of the axes
