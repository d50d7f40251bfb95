"""``python -m workers compare``: exit codes CI can use and a title from the manifests."""

from __future__ import annotations

from pathlib import Path

from workers.__main__ import main

DEMO = Path(__file__).resolve().parents[2] / "reviewapp" / "demo"


def test_exit_code_0_when_the_check_passes(capsys) -> None:
    """The same run on both sides: nothing changed, the check succeeds, exit 0."""
    run = str(DEMO / "seed000_before.blkparse.txt")
    assert main(["compare", run, "--", run]) == 0
    assert "Check: SUCCESS" in capsys.readouterr().out


def test_exit_code_1_when_the_check_warns(capsys) -> None:
    """raid5 6.1 vs 7.2 with the mean-request rule at warning level: md0's requests halve
    (2048 -> 1024 KB), "Check: WARNING", exit 1."""
    code = main(["compare", "--threshold", "rule_mean_request_drop=1", str(DEMO / "k61_W1b"),
                 "--", str(DEMO / "k72_W1b")])
    out = capsys.readouterr().out
    assert "Check: WARNING" in out and code == 1


def test_exit_code_2_when_the_check_fails_and_the_title_comes_from_the_manifests(capsys) -> None:
    """The same rule at fail level: "Check: FAIL", exit 2; the report's title names both
    kernels and the workload of the capture directories' blkreview.toml manifests."""
    code = main(["compare", "--threshold", "rule_mean_request_drop=2", str(DEMO / "k61_W1b"),
                 "--", str(DEMO / "k72_W1b")])
    out = capsys.readouterr().out
    assert "Check: FAIL" in out and code == 2
    assert out.splitlines()[0].startswith("6.1.0-57-amd64 vs 7.2.13+deb14-amd64: dd ")
    assert "baseline vs patched" not in out
    assert "Baseline, kernel 6.1.0-57-amd64:" in out
    assert "Stack:      raid5, 8 members, 512 KB chunk" in out


def test_exit_code_3_on_usage_and_input_errors(tmp_path, capsys) -> None:
    """A missing file, a bad option value and an unreadable trace: one line, exit 3."""
    run = str(DEMO / "seed000_before.blkparse.txt")
    assert main(["compare", str(tmp_path / "nope"), "--", run]) == 3
    assert main(["compare", "--threshold", "bogus=1", run, "--", run]) == 3
    assert main(["compare", run, run]) == 3  # no '--'
    bad = tmp_path / "bad.blkparse.txt"
    bad.write_text("8,0 0 1 0.000000000 1 D R 0 + 8 [dd]\n" + "garbage \x00\x01 line\n" * 3)
    bad.write_bytes(b"\x00" * 64)
    code = main(["compare", str(bad), "--", run])
    err = capsys.readouterr().err
    assert code == 3 and "Traceback" not in err and "error:" in err
