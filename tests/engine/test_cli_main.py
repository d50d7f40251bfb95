"""The command line's frame: every subcommand has --json and --quiet, the console script's
name, and progress on stderr only when stderr is a terminal (and not with --quiet)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from workers.__main__ import SUBCOMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[2]
BEFORE = ROOT / "reviewapp" / "demo" / "seed000_before.blkparse.txt"


def test_every_subcommand_has_json_and_quiet():
    """Machine-readable output and a way to silence progress, for each subcommand."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) == set(SUBCOMMANDS) >= {"inspect", "analyze", "replay", "compare",
                                                    "submit"}
    for name, p in sub.choices.items():
        assert "--json" in p._option_string_actions, name
        assert "--quiet" in p._option_string_actions, name


def test_console_script_points_at_the_same_main(monkeypatch):
    """[project.scripts] blkreview = workers.__main__:main, which names itself blkreview."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"blkreview": "workers.__main__:main"}
    monkeypatch.setattr(sys, "argv", ["/usr/local/bin/blkreview"])
    assert build_parser().prog == "blkreview"
    monkeypatch.setattr(sys, "argv", ["/x/workers/__main__.py"])
    assert build_parser().prog == "python -m workers"
    installed = Path(sys.executable).parent / "blkreview"
    if installed.exists():  # scripts/setup.sh installed the project
        r = subprocess.run([str(installed), "inspect", "--json", str(BEFORE)],
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert r.returncode == 0 and r.stdout.lstrip().startswith("{"), r.stderr


def _run_with_tty_stderr(*args: str) -> tuple[int, str, bytes]:
    """Run ``python -m workers ARGS`` with stderr on a pseudo-terminal; (rc, stdout, stderr)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "workers", *args], stdout=subprocess.PIPE,
                            stderr=slave, stdin=subprocess.DEVNULL, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm"})
    os.close(slave)
    err = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        err += chunk
    out = proc.stdout.read().decode() if proc.stdout else ""
    rc = proc.wait(timeout=120)
    os.close(master)
    return rc, out, err


@pytest.mark.slow
def test_progress_only_on_a_terminal_and_not_with_quiet():
    """stderr a terminal: a spinner (then erased); --quiet: nothing; stdout the same."""
    rc, out, err = _run_with_tty_stderr("analyze", "--json", str(BEFORE))
    assert rc == 0 and "analyze: working" in err.decode(errors="replace")
    rc_q, out_q, err_q = _run_with_tty_stderr("analyze", "--json", "--quiet", str(BEFORE))
    assert rc_q == 0 and err_q == b""
    assert out == out_q and out.lstrip().startswith("{")
    piped = subprocess.run([sys.executable, "-m", "workers", "analyze", "--json", str(BEFORE)],
                           capture_output=True, text=True, cwd=ROOT, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert piped.stderr == "" and piped.stdout == out
