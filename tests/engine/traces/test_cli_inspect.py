"""``python -m workers inspect`` (workers/cli/inspect.py)."""

from __future__ import annotations

import argparse
import json
import struct
from pathlib import Path

import pytest

from workers.cli import inspect as cli


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc, out, _ = _run_both(argv, capsys)
    return rc, out


def _run_both(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    rc = cli.run(parser.parse_args(argv))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_inspect_per_cpu_files(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Formats, merged devices, counts per action and span are printed; exit 0."""
    rc, out = _run([str(data_dir / "demo.blktrace.0"), str(data_dir / "demo.blktrace.1")],
                   capsys)
    assert rc == 0
    assert "blktrace" in out
    assert "events: 29" in out
    assert "8,0 (demo): 29 events, analyzed at D" in out
    assert "Q 7" in out and "UT 1" in out
    assert "0.000000000 .. 0.000503000 s" in out


def test_inspect_json(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--json gives the same facts machine-readably."""
    rc, out = _run(["--json", str(data_dir / "demo.blkparse.txt")], capsys)
    rep = json.loads(out)
    assert rc == 0 and rep["events"] == 29 and rep["actions"]["Q"] == 7
    assert rep["devices"][0]["dev"] == "8,0" and rep["files"][0]["format"] == "blkparse"


def test_inspect_parse_error_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A corrupt trace prints the file, byte offset and reason and exits 1."""
    rec = struct.pack("<IIQQIIIIIHH", 0x65617407, 1, 1, 0, 4096, 0x00110001, 1, 8 << 20, 0,
                      0, 500)
    p = tmp_path / "sda.blktrace.0"
    p.write_bytes(rec)
    rc, out, err = _run_both([str(p)], capsys)
    assert rc == 1 and out == ""
    assert "sda.blktrace.0, byte 0: payload length 500 runs past the end" in err


def test_inspect_unknown_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Prose is reported as an unknown format, exit 1."""
    p = tmp_path / "notes.txt"
    p.write_text("just words\n")
    rc, out, err = _run_both([str(p)], capsys)
    assert rc == 1 and "not a recognised trace" in err and out == ""
