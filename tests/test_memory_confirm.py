"""Confirmed causes from the command line: `triage confirm`, `triage known`, `triage stats`.

The runs are slime logs (tests/metric_runs.py, THUDM/slime's `step N:` records) and the
CUDA OOM job of tests/service/service_runs.py (a slime traceback, as train.py dies of it).
"""

from __future__ import annotations

import getpass
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from metric_runs import healthy_series, slime_metrics_log
from triage.cli import main
from triage.memory import enrich

sys.path.insert(0, str(Path(__file__).resolve().parent / "service"))
from service_runs import slime_oom_run  # noqa: E402

ME = getpass.getuser()


@pytest.fixture(autouse=True)
def _allowed(monkeypatch):
    enrich.configure()
    monkeypatch.setenv("TRIAGE_ACTIVE_USERS", f"U0SOMEONE,{ME}")
    yield
    enrich.configure()


def _run_json(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["run", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _known(capsys) -> list[dict]:
    assert main(["known", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _undecided(root: Path) -> Path:
    """A grad-norm explosion with no rollout dump to decide it, and a reward-server error line."""
    s = {k: v.copy() for k, v in healthy_series(30, 0).items()}
    s["grad_norm"][12:] *= 8
    log = slime_metrics_log(s)
    log.log("ERROR reward server http://10.0.0.7:8000/score returned 502 for 3 samples, retrying", "rm_hub.py:77")
    log.write(root)
    return root


def test_confirm_is_stored_once_and_shown_on_the_next_run_with_the_same_signature(tmp_path, capsys):
    code, first = _run_json(capsys, str(slime_oom_run(tmp_path / "oom-a")))
    assert code == 0
    tid, verdict = first["history"]["triage_id"], first["root_cause"]["id"]
    assert first["history"]["signature"].startswith("OutOfMemoryError | CUDA out of memory")
    code, out, _ = _cli(capsys, "confirm", tid, verdict, "--note", "dynamic batch with 32k tokens")
    assert code == 0 and out.startswith(f"stored: triage {tid} confirmed {verdict} by {ME} on ")
    code, out, _ = _cli(capsys, "confirm", tid, verdict, "--note", "dynamic batch with 32k tokens")  # a repeated click
    assert code == 0 and out.startswith("already recorded:")
    assert len(_known(capsys)) == 1
    # Another run dies the same way (other paths, numbers, pids): it is recognised.
    other = slime_oom_run(tmp_path / "oom-b", steps=5)
    assert main(["run", str(other), "--markdown"]) == 0
    md = capsys.readouterr().out
    assert f"- seen before: 1 run(s), confirmed as {verdict} by {ME} on " in md
    assert "(dynamic batch with 32k tokens)" in md


def test_a_correction_ranks_first_when_the_walk_cannot_decide(tmp_path, capsys):
    code, first = _run_json(capsys, str(_undecided(tmp_path / "a")))
    assert code == 3 and first["candidates"][0]["id"] == "data.bad_sample"
    tid = first["history"]["triage_id"]
    code, out, _ = _cli(capsys, "confirm", tid, "kernel.nondeterministic", "--note", "deterministic mode fixed it")
    assert code == 0 and out.startswith(f"stored: triage {tid} corrected from inconclusive to kernel.nondeterministic")
    code, second = _run_json(capsys, str(_undecided(tmp_path / "b")))
    assert code == 3
    top = second["candidates"][0]
    assert top["id"] == "kernel.nondeterministic"
    assert top["supports"][0].startswith(f"seen before: 1 run(s), confirmed as kernel.nondeterministic by {ME} on ")
    assert second["history"]["confirmed"][0]["triage_id"] == tid


def test_stats_count_given_confirmed_and_corrected(tmp_path, capsys):
    _, a = _run_json(capsys, str(slime_oom_run(tmp_path / "oom-a")))
    _, b = _run_json(capsys, str(slime_oom_run(tmp_path / "oom-b", steps=6)))
    _, c = _run_json(capsys, str(_undecided(tmp_path / "c")))
    verdict = a["root_cause"]["id"]
    assert main(["confirm", a["history"]["triage_id"], verdict]) == 0
    assert main(["confirm", b["history"]["triage_id"], "host.ram_exhausted"]) == 0
    assert main(["confirm", c["history"]["triage_id"], "numerics.overflow"]) == 0
    capsys.readouterr()
    assert main(["stats", "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[verdict] == {"id": verdict, "given": 2, "confirmed": 1, "corrected": 1,
                             "corrected_to": {"host.ram_exhausted": 1}, "precision": 0.5}
    assert rows["inconclusive"]["corrected_to"] == {"numerics.overflow": 1}
    assert main(["--width", "200", "stats"]) == 0
    table = capsys.readouterr().out
    assert verdict in table and "host.ram_exhausted ×1" in table and "50%" in table


def test_confirm_refused_off_the_allow_list_and_for_unknown_ids(tmp_path, capsys, monkeypatch):
    _, first = _run_json(capsys, str(slime_oom_run(tmp_path / "oom")))
    tid = first["history"]["triage_id"]
    cases = [
        (["confirm", tid, "no.such_verdict"], "no verdict 'no.such_verdict' in the catalog"),
        (["confirm", "0123456789abcdef", "healthy"], "no triage '0123456789abcdef' in "),
    ]
    for argv, message in cases:
        code, out, err = _cli(capsys, *argv)
        assert code == 2 and out == "" and err.count("\n") == 1 and message in err and "nothing stored" in err
    monkeypatch.setenv("TRIAGE_ACTIVE_USERS", "U0SOMEONE")
    code, _, err = _cli(capsys, "confirm", tid, first["root_cause"]["id"])
    assert code == 2 and err == f"triage: error: {ME} may not confirm causes: only the users in TRIAGE_ACTIVE_USERS may; nothing stored\n"
    monkeypatch.setenv("TRIAGE_ACTIVE_USERS", ME)
    assert _known(capsys) == []


def test_export_import_round_trip_and_a_malformed_file_is_refused_whole(tmp_path, capsys, monkeypatch):
    _, a = _run_json(capsys, str(slime_oom_run(tmp_path / "oom")))
    _, b = _run_json(capsys, str(_undecided(tmp_path / "c")))
    assert main(["confirm", a["history"]["triage_id"], a["root_cause"]["id"], "--note", "known: 32k tokens"]) == 0
    assert main(["confirm", b["history"]["triage_id"], "numerics.overflow"]) == 0
    capsys.readouterr()
    mine = _known(capsys)
    shared = tmp_path / "known-causes.json"
    code, out, _ = _cli(capsys, "known", "--export", str(shared))
    assert code == 0 and out == f"exported 2 confirmed cause(s) to {shared}\n"

    monkeypatch.setenv("TRIAGE_DB", str(tmp_path / "colleague.db"))
    body = json.loads(shared.read_text())
    bad = json.loads(json.dumps(body))
    bad["records"][1]["verdict"] = "no.such_verdict"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    code, _, err = _cli(capsys, "known", "--import", str(tmp_path / "bad.json"))
    tid = body["records"][1]["triage_id"]
    assert code == 2 and err.count("\n") == 1
    assert f"record 2 (triage {tid}): verdict 'no.such_verdict' is not a verdict id" in err and "nothing imported" in err
    bad["records"][1] = {**body["records"][1], "at": "yesterday"}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    code, _, err = _cli(capsys, "known", "--import", str(tmp_path / "bad.json"))
    assert code == 2 and f"record 2 (triage {tid}): at: " in err
    (tmp_path / "bad.json").write_text("{\"format\": \"triage-known-causes\", \"version\": 1, \"records\": [1]}")
    code, _, err = _cli(capsys, "known", "--import", str(tmp_path / "bad.json"))
    assert code == 2 and "record 1: " in err
    assert _known(capsys) == []  # nothing of any refused file was stored

    code, out, _ = _cli(capsys, "known", "--import", str(shared))
    assert code == 0 and out == f"imported 2 confirmed cause(s) from {shared}; 0 already known\n"
    assert _known(capsys) == mine
    code, out, _ = _cli(capsys, "known", "--import", str(shared))
    assert out.endswith("; 2 already known\n")
    # An imported cause is recognised on this machine's next run with the same signature.
    assert main(["run", str(slime_oom_run(tmp_path / "oom-again", steps=4)), "--markdown"]) == 0
    assert f"confirmed as {a['root_cause']['id']} by {ME} on " in capsys.readouterr().out


def test_the_postmortem_cites_the_confirmed_history(tmp_path, capsys):
    _, first = _run_json(capsys, str(slime_oom_run(tmp_path / "oom-a")))
    tid, verdict = first["history"]["triage_id"], first["root_cause"]["id"]
    assert main(["confirm", tid, verdict, "--note", "halved the token budget"]) == 0
    capsys.readouterr()
    assert main(["postmortem", str(slime_oom_run(tmp_path / "oom-b", steps=5))]) == 0
    section = capsys.readouterr().out.split("## Seen before", 1)[1].split("\n## ", 1)[0]
    assert f"- seen before: 1 run(s), confirmed as {verdict} by {ME} on " in section
    assert f": triage `{tid}` ({tmp_path / 'oom-a'}) confirmed as `{verdict}` by {ME} — halved the token budget" in section
