"""``python -m workers replay``: workload and trace inputs, --emit, typed errors."""

import argparse
import json
import lzma
import shutil
from pathlib import Path

from workers.cli import replay as cli

DATA = Path(__file__).resolve().parents[2] / "data" / "model"


def _run(argv, capsys):
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    rc = cli.run(parser.parse_args(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_workload_prints_seek_and_size_histograms(capsys):
    """--workload/--stack/--kernel prints every member's seek and size histograms."""
    rc, out, _ = _run(["--workload", "dd:bs=4480k,count=10,contig=all", "--stack",
                       "raid5:disks=8,chunk=64k", "--kernel", "6.1",
                       "--policy", "split_remainder=head"], capsys)
    assert rc == 0
    assert out.count("Read|Write seek") == 8
    assert "split_remainder=head" in out and "request sizes:" in out


def test_cli_trace_emit_blkparse_matches_real_d_lines(tmp_path, capsys):
    """--trace + --manifest --emit blkparse writes D lines identical to the 6.1 capture's."""
    trace = tmp_path / "all.blkparse.txt"
    with lzma.open(DATA / "6.1_W1b.blkparse.txt.xz") as src, open(trace, "wb") as dst:
        shutil.copyfileobj(src, dst)
    out_file = tmp_path / "pred.txt"
    rc, _, _ = _run(["--trace", str(trace), "--manifest", str(DATA / "6.1_W1b.blkreview.toml"),
                     "--device", "nvme", "--emit", "blkparse", "-o", str(out_file), "--quiet"],
                    capsys)
    assert rc == 0

    def d_lines(path):
        return [(p[0], p[7], p[9]) for p in (ln.split() for ln in path.read_text().splitlines())
                if len(p) > 9 and p[5] == "D"]
    assert d_lines(out_file) == d_lines(trace)
    assert len(d_lines(out_file)) == 400


def test_cli_emit_json_summary(tmp_path, capsys):
    """--emit json writes policy, stack and per-device statistics."""
    out_file = tmp_path / "p.json"
    rc, _, _ = _run(["--workload", "dd:bs=1m,count=4", "--stack", "disk:max_sectors_kb=512",
                     "--kernel", "6.18", "--emit", "json", "-o", str(out_file), "--quiet"],
                    capsys)
    data = json.loads(out_file.read_text())
    assert rc == 0 and data["policy"]["split_remainder"] == "head"
    assert data["devices"]["8,0"]["sizes"]["count"] == 8


def test_cli_bad_input_is_a_one_line_error(capsys, tmp_path):
    """Unknown stack kinds, policy fields and broken manifests exit 2 with a message."""
    rc, _, err = _run(["--workload", "dd:bs=1m", "--stack", "raid9", "--kernel", "6.1"], capsys)
    assert rc == 2 and "unknown stack kind" in err
    rc, _, err = _run(["--workload", "dd:bs=1m", "--stack", "disk", "--kernel", "6.1",
                       "--policy", "split_to=head"], capsys)
    assert rc == 2 and "split_to" in err
    bad = tmp_path / "blkreview.toml"
    bad.write_text("kernel = [unclosed\n")
    rc, _, err = _run(["--workload", "dd:bs=1m", "--manifest", str(bad)], capsys)
    assert rc == 2 and "blkreview.toml" in err


def test_cli_guessed_kernel_version_warns_on_stderr(capsys):
    """A distribution ABI version is modelled, and the guess is said on stderr."""
    rc, out, err = _run(["--workload", "dd:bs=1m,count=2", "--stack", "disk",
                         "--kernel", "6.12.0-31-amd64"], capsys)
    assert rc == 0
    assert "replay: warning:" in err and "distribution ABI" in err
