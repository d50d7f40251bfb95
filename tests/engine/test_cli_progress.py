"""Progress bars of the CLI (issue 12): on stderr when it is a terminal (a real pseudo-terminal
here), with bytes done/total while parsing and bios done/total while replaying; nothing with
``--quiet`` or when stderr is a pipe; ``--json`` stdout the same, clean JSON in every case."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import ROOT, blkparse_lines

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
BYTES = r"(\d+(?:\.\d+)?) (B|kB|MB)"


def run(args: list[str], *, terminal: bool) -> tuple[int, str, str]:
    """``python -m workers ARGS``: stdout through a pipe; stderr on a pseudo-terminal (120
    columns) or a pipe. Returns (exit code, stdout, stderr with ANSI controls removed)."""
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                         if p)}
    env.pop("NO_COLOR", None)
    if not terminal:
        r = subprocess.run([sys.executable, "-m", "workers", *args], capture_output=True,
                           text=True, env=env, cwd=ROOT, timeout=300, stdin=subprocess.DEVNULL)
        return r.returncode, r.stdout, ANSI.sub("", r.stderr)
    master, slave = pty.openpty()
    import fcntl
    import struct
    import termios

    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "workers", *args], stdout=subprocess.PIPE,
                            stderr=slave, stdin=subprocess.DEVNULL, env=env, cwd=ROOT)
    os.close(slave)
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the terminal
                return
            if not data:
                return
            chunks.append(data)
    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    out, _ = proc.communicate(timeout=300)
    reader.join(timeout=30)
    os.close(master)
    return proc.returncode, out.decode(), ANSI.sub("", b"".join(chunks).decode(errors="replace"))


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("progress") / "big.blkparse.txt"
    path.write_bytes(blkparse_lines([256 * k for k in range(20000)]))
    return path


def test_parse_shows_bytes_done_of_total_on_a_terminal_only(trace):
    size = trace.stat().st_size
    code, out, err = run(["inspect", "--json", str(trace)], terminal=True)
    assert code == 0, err
    report = json.loads(out)  # stdout is the report alone
    assert "parsing 1 file" in err
    pairs = re.findall(BYTES + "/" + BYTES, err)
    assert pairs, err
    # the bar's total is the file's size, and it was drawn finished (done == total)
    total = f"{size / 1000:.1f} kB" if size < 1_000_000 else f"{size / 1e6:.1f} MB"
    assert any(f"{d} {du}" == total and f"{t} {tu}" == total for d, du, t, tu in pairs), \
        (total, pairs)
    assert any(float(d) == 0 for d, _, _, _ in pairs)  # and at its start, 0 done

    code, quiet_out, quiet_err = run(["inspect", "--json", "--quiet", str(trace)], terminal=True)
    assert code == 0 and quiet_err.strip() == ""
    code, piped_out, piped_err = run(["inspect", "--json", str(trace)], terminal=False)
    assert code == 0 and piped_err.strip() == ""
    assert json.loads(quiet_out) == json.loads(piped_out) == report


def test_analyze_parses_with_the_same_bar(trace):
    code, out, err = run(["analyze", "--seek", "--json", str(trace)], terminal=True)
    assert code == 0, err
    json.loads(out)
    assert "parsing 1 file" in err and re.search(BYTES + "/" + BYTES, err)


REPLAY = ["replay", "--workload", "dd:bs=4480k,count=20,contig=all", "--stack",
          "raid5:disks=8,chunk=64k", "--kernel", "6.17", "--json"]


def test_replay_shows_bios_done_of_total():
    code, out, err = run(REPLAY, terminal=True)
    assert code == 0, err
    summary = json.loads(out)
    counts = [(int(d.replace(",", "")), int(t.replace(",", "")))
              for d, t in re.findall(r"([\d,]+)/([\d,]+) bios", err)]
    assert counts, err
    total = counts[-1][1]
    assert total >= 20 and (0, total) in counts and (total, total) in counts  # 20 dd I/Os
    assert "replaying on" in err

    code, q_out, q_err = run([*REPLAY, "--quiet"], terminal=True)
    assert code == 0 and q_err.strip() == ""
    code, p_out, p_err = run(REPLAY, terminal=False)
    assert code == 0 and "bios" not in p_err
    assert json.loads(q_out) == json.loads(p_out) == summary


def test_progress_object_draws_stages_to_a_forced_terminal():
    """The class itself, as lab uses it: stages with totals, lines printed above the bar."""
    from rich.console import Console

    from workers.cli.progress import Progress, current

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=120)
    with Progress(enabled=True, what="lab", console=console) as p:
        assert current() is p
        p.stage("kernel 6.17: booting", total=2, unit="kernels")
        p.log("[    3s] kernel 6.17: booted")
        p.advance(1)
        p.stage("kernel 6.18: booting", total=2, unit="kernels")
        p.advance(2)
    text = ANSI.sub("", buf.getvalue())
    assert "kernel 6.17: booting" in text and "0/2 kernels" in text and "2/2 kernels" in text
    assert "kernel 6.17: booted" in text
    assert current() is not p and not current().enabled

    off = io.StringIO()
    with Progress(enabled=False, what="x", console=Console(file=off, force_terminal=True)) as p:
        p.stage("nothing", total=3, unit="bios")
        p.advance(3)
    assert off.getvalue() == ""


def test_lab_stages_on_a_terminal_lines_in_logs_and_quiet(capsys):
    """lab's stages: on a terminal a bar of captures done/total whose text is the current
    stage, each stage's timestamped line above it; not a terminal: the lines alone (CI logs);
    --quiet: failures only."""
    from rich.console import Console

    from workers.cli.lab import _Clock
    from workers.cli.progress import Progress

    buf = io.StringIO()
    with Progress(enabled=True, what="lab", console=Console(file=buf, force_terminal=True,
                                                            width=120)) as bar:
        clock = _Clock(bar)
        bar.stage("lab: starting", total=4, unit="captures")
        clock("kernel: downloading linux-image-6.17")
        clock("boot: 6.17 under kvm")
        bar.advance(2)
        clock.failed("6.18 dd_1: FAILED: timeout")
        bar.advance(4)
    text = ANSI.sub("", buf.getvalue())
    assert "0/4 captures" in text and "4/4 captures" in text
    assert "kernel: downloading linux-image-6.17" in text and "] boot: 6.17 under kvm" in text
    assert "FAILED: timeout" in text
    assert capsys.readouterr().err == ""  # everything went to the bar's console

    plain = _Clock(Progress(enabled=False, what="lab"))
    plain("boot: 6.17 under kvm")
    err = capsys.readouterr().err
    assert re.fullmatch(r"\[\s*\d+s\] boot: 6.17 under kvm\n", err)

    quiet = _Clock(Progress(enabled=False, what="lab"), quiet=True)
    quiet("boot: 6.17 under kvm")
    quiet.failed("6.18 dd_1: FAILED: timeout")
    assert capsys.readouterr().err.count("\n") == 1  # the failure only
