"""The host side of the lab: where things are cached, how host commands run, which tools exist."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path


class LabError(Exception):
    """A lab failure with a message a user can act on (printed as ``error: ...``, exit 1)."""


def cache_dir() -> Path:
    """``$BLKREVIEW_LAB_CACHE``, else ``$XDG_CACHE_HOME/blkreview-lab`` (``~/.cache/...``).

    Kernels, the guest root and apt's lists live here, outside any checkout, so that CI runs
    and clones share them.
    """
    env = os.environ.get("BLKREVIEW_LAB_CACHE")
    if env:
        path = Path(env)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        path = Path(base) / "blkreview-lab"
    path.mkdir(parents=True, exist_ok=True)
    return path


def need_tool(name: str, package: str) -> str:
    """The path of a host tool, or a LabError naming the Debian package that has it."""
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if not found:
        raise LabError(f"{name} not found: install the Debian package {package} "
                       "(scripts/setup.sh does it as root)")
    return found


def run(cmd: Sequence[str], *, what: str, cwd: Path | None = None,
        env: dict[str, str] | None = None, timeout: float | None = None,
        stdin: bytes | None = None) -> str:
    """Run a host command; on failure a LabError quoting ``what`` and the end of its output."""
    try:
        proc = subprocess.run(list(cmd), cwd=cwd, env=env, input=stdin, capture_output=True,
                              timeout=timeout, check=False)
    except FileNotFoundError:
        raise LabError(f"{what}: {cmd[0]} not found") from None
    except subprocess.TimeoutExpired:
        raise LabError(f"{what}: timed out after {timeout:.0f} s") from None
    out = proc.stdout.decode("utf-8", "replace")
    if proc.returncode != 0:
        err = (proc.stderr.decode("utf-8", "replace") + out).strip().splitlines()
        tail = "\n  ".join(err[-15:])
        raise LabError(f"{what} failed (exit {proc.returncode}):\n  {tail}")
    return out


def atomic_dir(final: Path) -> Path:
    """A scratch directory next to ``final``, to be renamed onto it once complete."""
    tmp = final.with_name(final.name + f".tmp{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    return tmp
