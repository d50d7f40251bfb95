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


def _bundle(tmp_path: Path, name: str, scheduler: str) -> str:
    d = tmp_path / name
    d.mkdir()
    (d / "trace.blkparse.txt").write_text((DEMO / "seed000_before.blkparse.txt").read_text())
    (d / "blkreview.toml").write_text(
        'kernel = "6.1.0-57-amd64"\n[workload]\ncommand = "dd if=/dev/sda bs=64k"\n'
        f'[limits."8,0"]\nscheduler = "{scheduler}"\nnr_requests = 64\nmax_sectors_kb = 1280\n')
    return str(d)


def test_environment_gate_warns_at_the_top_of_the_report(tmp_path, capsys) -> None:
    """Same trace and kernel on both sides, but the baseline ran on mq-deadline and the
    patched run on none: the CLI computes the consistency gate, prints its warning before the
    summary, and rule_environment (warning by default) makes the check warn (exit 1). With the
    same scheduler on both sides there is no warning and the check succeeds."""
    code = main(["compare", _bundle(tmp_path, "a", "mq-deadline"), "--",
                 _bundle(tmp_path, "b", "none")])
    out = capsys.readouterr().out
    lines = out.splitlines()
    warn = next(i for i, line in enumerate(lines) if line.startswith("WARNING: the environment"))
    assert "scheduler of " in lines[warn + 1] and "mq-deadline -> none" in lines[warn + 1]
    assert warn < next(i for i, line in enumerate(lines) if line.startswith("Check:"))
    assert warn < 8  # at the top: right after the header
    assert "Check: WARNING" in out and code == 1
    assert main(["compare", _bundle(tmp_path, "c", "none"), "--",
                 _bundle(tmp_path, "d", "none")]) == 0
    out = capsys.readouterr().out
    assert "environment differs" not in out and "Check: SUCCESS" in out


def test_json_is_the_whole_stdout_and_carries_the_check_the_exit_code_follows(capsys) -> None:
    """``--json`` (issue 12: machine-readable output for every command): stdout is one JSON
    document, its check state is the one the exit code reports (fail -> 2), and the text
    report is not mixed in."""
    import json

    code = main(["compare", "--json", "--threshold", "rule_mean_request_drop=2",
                 str(DEMO / "k61_W1b"), "--", str(DEMO / "k72_W1b")])
    out = json.loads(capsys.readouterr().out)
    assert out["check"]["state"] == "fail" and code == 2
    assert any("mean request" in r for r in out["check"]["reasons"]), out["check"]["reasons"]
    same = str(DEMO / "seed000_before.blkparse.txt")
    assert main(["compare", "--json", same, "--", same]) == 0
    assert json.loads(capsys.readouterr().out)["check"]["state"] == "success"
