"""The analyze and compare commands, run in a subprocess on small blkparse text files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
from analyzer_helpers import fold, requests, sectors_from_gaps, seed_seek_blocks, seed_text

from workers.events import EventTable
from workers.traces.writers import write_blkparse

ROOT = Path(__file__).resolve().parents[3]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "workers", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=120)


def _write(table: EventTable, path: Path) -> Path:
    with open(path, "w") as f:
        write_blkparse(table, f)
    return path


def _run_table(gaps: list[int], us_per_req: int) -> EventTable:
    """D and C events for requests at the given seek gaps, us_per_req apart."""
    sectors = sectors_from_gaps(gaps, 128)
    spec = [(s, 128, "R", {"D": i * us_per_req * 1000, "C": i * us_per_req * 1000 + 500_000})
            for i, s in enumerate(sectors)]
    return requests(spec)


def test_analyze_seek_prints_seed000_layout(tmp_path: Path) -> None:
    """--seek on a file with seed 000's 'after' distribution prints the seed's block."""
    gaps = [0] * 21483 + [64] * 7161
    np.random.default_rng(2).shuffle(gaps)
    from analyzer_helpers import stream

    f = _write(stream(sectors_from_gaps(gaps), 128), tmp_path / "after.txt")
    r = _cli("analyze", "--seek", str(f))
    assert r.returncode == 0, r.stderr
    lines = fold(r.stdout)
    assert lines[0] == "8,0: stage D"
    assert lines[1:] == seed_seek_blocks(seed_text("000_bd92b2ca435366b4.txt"))[1]


def test_analyze_full_text_and_json(tmp_path: Path) -> None:
    """Without --seek: sizes, fragmentation and the iostat-like table; --json parses."""
    f = _write(_run_table([0] * 20 + [64] * 5, 1000), tmp_path / "run.txt")
    r = _cli("analyze", str(f))
    assert r.returncode == 0, r.stderr
    assert "Read|Write seek" in r.stdout and "sizes: 26 requests" in r.stdout
    assert "iostat-like" in r.stdout and "r_await" in r.stdout
    import json

    j = _cli("analyze", "--json", "--stage", "C", str(f))
    res = json.loads(j.stdout)
    assert res["devices"]["8,0"]["stage"] == "C"


def test_analyze_bad_file_is_a_typed_error(tmp_path: Path) -> None:
    """Garbage input gives an error line naming the file and exit code 1, no traceback."""
    bad = tmp_path / "bad.txt"
    bad.write_text("this is not a trace\n")
    r = _cli("analyze", str(bad))
    assert r.returncode == 1 and "bad.txt" in r.stderr and "Traceback" not in r.stderr
    assert _cli("analyze", str(tmp_path / "missing")).returncode == 2


def test_compare_prints_report_three_vs_three(tmp_path: Path) -> None:
    """3 fragmented vs 3 sequential runs: the report has both sides and verdicts."""
    rng = np.random.default_rng(5)
    base, patched = [], []
    for i in range(3):
        g = list(rng.choice([0, 64, 512], size=60))
        base.append(str(_write(_run_table(g, 1000), tmp_path / f"b{i}.txt")))
        g = list(rng.choice([0, 0, 0, 64], size=60))
        patched.append(str(_write(_run_table(g, 1000), tmp_path / f"p{i}.txt")))
    r = _cli("compare", "--title", "block: a patch", *base, "--", *patched)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "Before this patch:" in out and "After this patch:" in out
    assert out.count("Read|Write seek") == 2
    assert "zero-seek share" in out and "improved" in out
    assert "Runs:       3 baseline, 3 patched" in out and "Check:" in out


def test_compare_single_run_and_usage_errors(tmp_path: Path) -> None:
    """1 vs 1: timing needs more runs and never fails (exit 0) though throughput halves; a
    missing '--' is a usage error."""
    a = str(_write(_run_table([0] * 10, 1000), tmp_path / "a.txt"))
    b = str(_write(_run_table([0] * 10, 2000), tmp_path / "b.txt"))
    r = _cli("compare", a, "--", b)
    assert r.returncode == 0 and "Check: SUCCESS" in r.stdout, r.stderr
    assert "single run" in r.stdout and "timing: " in r.stdout
    assert _cli("compare", a, b).returncode == 3


def test_compare_directory_runs_skip_notes_and_duplicate_text(tmp_path: Path) -> None:
    """A run directory with raw blktrace, its blkparse text and a notes file counts events once."""
    from workers.traces.writers import write_blktrace

    for side, gaps in (("base", [0] * 20), ("patched", [64] * 20)):
        d = tmp_path / side
        d.mkdir()
        t = _run_table(gaps, 1000)
        with open(d / "sda.blktrace.0", "wb") as f:
            write_blktrace(t, f)
        _write(t, d / "sda.blkparse.txt")
        (d / "commands.txt").write_text("+ dd if=/dev/sda of=/dev/null bs=64k\n")
    r = _cli("compare", "--threshold", "rule_zero_seek_drop=1", str(tmp_path / "base"), "--",
             str(tmp_path / "patched"))
    # zero-seek share 100% -> 0%: a mechanism rule at warning level
    assert r.returncode == 1 and "Check: WARNING" in r.stdout, r.stderr
    assert "zero-seek share must not drop" in r.stdout
    assert "commands.txt" in r.stderr and "skipped" in r.stderr
    assert "cnt 20, zero cnt 20" in r.stdout and "cnt 20, zero cnt 0" in r.stdout


def test_analyze_bad_and_absent_device_are_one_line_errors(tmp_path: Path) -> None:
    """--device xyz is a usage error; a device not in the trace names the ones that are."""
    f = str(_write(_run_table([0] * 5, 1000), tmp_path / "a.txt"))
    r = _cli("analyze", "--device", "xyz", f)
    assert r.returncode == 2 and "bad device 'xyz'" in r.stderr and "Traceback" not in r.stderr
    r = _cli("analyze", "--device", "9,9", f)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == "error: device 9,9 not in the trace (devices: 8,0)"
    r = _cli("compare", "--device", "8:0:1", f, "--", f)
    assert r.returncode == 3 and "bad device" in r.stderr and "Traceback" not in r.stderr


def test_analyze_and_inspect_take_a_capture_directory(tmp_path: Path) -> None:
    """A directory is one bundle for analyze and inspect too; notes are skipped with a warning."""
    d = tmp_path / "run"
    d.mkdir()
    _write(_run_table([0] * 9, 1000), d / "sda.blkparse.txt")
    (d / "commands.txt").write_text("+ dd if=/dev/sda of=/dev/null\n")
    r = _cli("analyze", "--seek", str(d))
    assert r.returncode == 0, r.stderr
    assert "cnt 9, zero cnt 9" in r.stdout and "commands.txt" in r.stderr
    r = _cli("inspect", str(d))
    assert r.returncode == 0, r.stderr
    assert "events: 20" in r.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    r = _cli("analyze", str(empty))
    assert r.returncode == 2 and "holds no trace" in r.stderr and "Traceback" not in r.stderr


def test_analyze_summary_only_bundle_says_so(tmp_path: Path) -> None:
    """An fio JSON alone has no events: analyze says so instead of printing nothing."""
    f = tmp_path / "fio.json"
    f.write_text('{"fio version": "fio-3.33", "jobs": [{"jobname": "j", "read": {"bw": 1, '
                 '"iops": 1, "io_bytes": 1, "runtime": 1}, "write": {"bw": 0, "iops": 0, '
                 '"io_bytes": 0, "runtime": 0}}]}')
    r = _cli("analyze", str(f))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "no trace events to analyze; summaries: fio (1 rows)"


def test_cli_closed_pipe_is_not_a_traceback(tmp_path: Path) -> None:
    """`analyze ... | head -1`: a reader that goes away ends the command without a traceback."""
    f = str(_write(_run_table(list(range(0, 4000, 8)), 1000), tmp_path / "a.txt"))
    p = subprocess.Popen([sys.executable, "-m", "workers", "analyze", f], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # before the command writes anything
    err = p.stderr.read()
    rc = p.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipe" not in err
    assert rc == 141


def test_compare_bad_threshold_value_before_parsing(tmp_path: Path) -> None:
    """A non-numeric threshold is a one-line usage error naming the threshold."""
    f = str(_write(_run_table([0] * 5, 1000), tmp_path / "a.txt"))
    r = _cli("compare", "--threshold", "throughput_drop_fail_pct=abc", f, "--", f)
    assert r.returncode == 3
    assert r.stderr.strip() == "error: threshold throughput_drop_fail_pct: 'abc' is not a number"
