"""A notebook's saved output (Kaggle's `.log`: a JSON array of stream records, one per line) is read as its text.

The records' shape is Rusheel86/Chaos-Economy's vsr-new.log, a TRL GRPO run on Kaggle: stderr and stdout records
whose `data` holds the console's text, a progress bar's carriage returns and the Trainer's dicts included.
"""

from __future__ import annotations

import json
from pathlib import Path

from triage.cli import main
from triage.formats import log_parts
from triage.formats.slime_log import scan_logs


def _record(stream: str, t: float, data: str) -> str:
    return json.dumps({"stream_name": stream, "time": t, "data": data}, separators=(",", ":"))


def _trl_record(i: int) -> str:
    return (f"\r  {i}%|▍ | {i}/500 [03:00<4:01:23, 29.26s/it]\r{{'loss': '0.00{i}', 'grad_norm': '0.{7 + i % 2}', "
            f"'learning_rate': '4e-06', 'completions/mean_length': '{180 + i}.4', 'reward': '{-2.5 + i / 10}', "
            f"'reward_std': '2.751', 'kl': '0.00{i}', 'epoch': '0.{i:02d}'}}\n")


def _notebook_log(path: Path, records: int = 12, cut: bool = False) -> Path:
    lines = [_record("stderr", 7.22, "0.00s - Debugger warning: It seems that frozen modules are being used, which may\n"),
             _record("stdout", 19.5, "  Installing build dependencies ... \u001b[?25l\u001b[?25hdone\r\n")]
    lines += [_record("stdout", 300.0 + i, _trl_record(i)) for i in range(1, records + 1)]
    text = "[" + "\n,".join(lines) + "\n]"
    if cut:
        text = text[: text.rindex("'reward'")]  # the download cut inside the last record
    path.write_text(text, encoding="utf-8")
    return path


def test_a_notebooks_stream_records_are_read_as_its_console(tmp_path, capsys):
    log = _notebook_log(tmp_path / "vsr-new.log")
    index = scan_logs([log])
    assert index.notebook_output == [str(log)]
    assert index.metrics.count("hf_log") == 12
    assert index.framework == "hf_trainer"
    # the text's lines: two lines of pip and debugger output, then a line per record
    assert index.lines == 14
    rc = main(["run", str(log), "--no-cache"])
    out = capsys.readouterr().out
    assert rc in (0, 3)
    # (the panel wraps the note where the temporary path's length puts it: its border is no word)
    assert "a notebook's saved output" in " ".join(out.replace("│", " ").split())


def test_a_stream_array_cut_mid_record_reads_what_it_holds(tmp_path, capsys):
    log = _notebook_log(tmp_path / "cut.log", cut=True)
    index = scan_logs([log])
    assert index.metrics.count("hf_log") == 11  # the last record's dict is cut before its end
    assert main(["run", str(log), "--json", "--no-cache"]) in (0, 3)
    assert json.loads(capsys.readouterr().out)["root_cause"]["id"]


def test_records_that_are_not_stream_records_are_passed_over_without_a_traceback(tmp_path, capsys):
    log = tmp_path / "odd.log"
    log.write_text('[{"stream_name":"stdout","data":"' + "[" * 5 + '"}\n,[1, 2]\n,{"stream_name":"x","data":7}\n'
                   ',{"stream_name":"stdout","data":"' + '[' * 100000 + '"}\n,' + "[" * 200000 + "\n]",
                   encoding="utf-8")
    rc = main(["run", str(log), "--no-cache"])
    captured = capsys.readouterr()
    assert rc in (2, 3) and "Traceback" not in captured.out + captured.err


def test_a_large_notebook_log_is_read_in_one_pass(tmp_path, monkeypatch):
    """No part can start at a byte offset of the array's text: the file is never cut for the parallel scan."""
    monkeypatch.setattr(log_parts, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(log_parts, "_usable_cpus", lambda: 2)
    log = _notebook_log(tmp_path / "big.log", records=40)
    assert log_parts._cuts(log) == []
    assert scan_logs([log]).metrics.count("hf_log") == 40


def test_a_notebooks_version_lines_are_read_from_its_text(tmp_path):
    from triage.versions import head_bytes

    log = tmp_path / "k.log"
    log.write_text("[" + _record("stdout", 3.0, "Successfully installed trl-0.19.0 vllm-0.9.2\n") + "\n]",
                   encoding="utf-8")
    assert head_bytes(log, 1 << 20) == b"Successfully installed trl-0.19.0 vllm-0.9.2\n"
