"""No machine-specific absolute paths in code, tests or docs (issue 12): the shared folder is
``../shared`` beside the repository or ``$BLKREVIEW_SHARED`` (tests/shared.py), never the
development machine's own path. Every file git tracks is read; a hit names file and line."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.shared import REPO_ROOT

#: A home or workspace directory of some machine (``/home/<user>/``, ``/Users/<user>/``, the
#: sessions' workspace), not preceded by a path or URL character (``file:///srv/x`` and
#: ``/mnt/lab`` inside the lab's VM are fine).
MACHINE_PATH = re.compile(r"(?<![\w.~$/-])/(?:work|home|Users)/[\w.-]+")


def _tracked() -> list[str]:
    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True,
                         check=True).stdout
    return [p for p in out.decode().split("\0") if p]


def test_no_tracked_file_names_a_machine_path() -> None:
    """The tracked text files name neither a home/workspace path nor this checkout's own
    location (its directory or the directory beside it, where ../shared lives)."""
    # the checkout's own location as a path of its own, not inside a longer relative path
    places = "|".join(re.escape(p) for p in (str(REPO_ROOT), str(REPO_ROOT.parent) + "/"))
    own = re.compile(r"(?<![\w.~$/-])(?:" + places + ")")
    problems = []
    files = _tracked()
    assert len(files) > 100
    for name in files:
        path = REPO_ROOT / name
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary (traces, archives)
        text = data.decode(errors="replace")
        for n, line in enumerate(text.splitlines(), 1):
            hit = MACHINE_PATH.search(line) or own.search(line)
            if hit:
                problems.append(f"{name}:{n}: {line.strip()[:120]}")
    assert not problems, "machine-specific paths (use ../shared or an environment " \
        "variable):\n" + "\n".join(problems)


def test_the_pattern_finds_what_it_should() -> None:
    """The check can fail: the paths the issue named are caught, legitimate ones are not."""
    # spelled in pieces so this file does not trip the check above
    for bad in ("see /" + "work/shared/seeds/000.txt", "ROOT = '/" + "home/dev/blkreview'",
                "# from /" + "Users/me/src"):
        assert MACHINE_PATH.search(bad), bad
    for ok in ("file:///srv/media", "mkdir -p /mnt/lab", "../shared/seeds/", "$HOME/work/x",
               "s3+http://seaweedfs:8333/blkreview", "lab-out/work/x"):
        assert not MACHINE_PATH.search(ok), ok
