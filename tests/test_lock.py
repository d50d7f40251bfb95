"""The lock files are what gets installed: every requirement of pyproject.toml is locked with
hashes, the runtime lock agrees with the dev lock, and this environment has exactly the locked
versions (so a fresh machine that runs scripts/setup.sh installs what CI tested)."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
STALE = "run `make lock` (pyproject.toml changed since the lock was made)"


def read_lock(path: Path) -> dict[str, tuple[str, str, int]]:
    """name -> (version, marker, number of hashes) of a ``uv pip compile --universal`` lock,
    for the pins whose marker holds in this interpreter (a universal lock may pin a package
    twice, e.g. one numpy below Python 3.12 and another from 3.12 on). ``"*all*"`` maps to
    the number of pins and the fewest hashes any pin has."""
    out: dict[str, tuple[str, str, int]] = {}
    pins, fewest = 0, 1 << 30
    for block in re.split(r"\n(?=[A-Za-z0-9])", path.read_text()):
        m = re.match(r"([A-Za-z0-9_.\-\[\]]+)==([^\s;\\]+)\s*(?:;\s*([^\\\n]+))?", block)
        if not m:
            continue
        marker = (m.group(3) or "").strip()
        hashes = block.count("--hash=sha256:")
        pins, fewest = pins + 1, min(fewest, hashes)
        if marker and not Marker(marker).evaluate():
            continue
        out[canonicalize_name(m.group(1).split("[")[0])] = (m.group(2), marker, hashes)
    out["*all*"] = ("", "", fewest)
    out["*pins*"] = ("", "", pins)
    return out


def project_requirements() -> tuple[list[Requirement], list[Requirement]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = [Requirement(r) for r in project["dependencies"]]
    dev = [Requirement(r) for r in project.get("optional-dependencies", {}).get("dev", [])]
    return runtime, dev


@pytest.fixture(scope="module")
def locks() -> tuple[dict[str, tuple[str, str, int]], dict[str, tuple[str, str, int]]]:
    return read_lock(ROOT / "requirements.lock"), read_lock(ROOT / "requirements-dev.lock")


def test_every_locked_package_has_hashes(locks):
    """pip installs the locks with --require-hashes: each pin carries at least one sha256."""
    runtime, dev = locks
    assert runtime["*pins*"][2] > 20 and dev["*pins*"][2] > runtime["*pins*"][2]
    assert runtime["*all*"][2] >= 1 and dev["*all*"][2] >= 1


def test_pyproject_requirements_are_locked(locks):
    """Each dependency of pyproject.toml is in the lock at a version its range allows."""
    runtime_lock, dev_lock = locks
    runtime, dev = project_requirements()
    problems = []
    for reqs, lock, label in ((runtime, runtime_lock, "requirements.lock"),
                              (runtime + dev, dev_lock, "requirements-dev.lock")):
        for req in reqs:
            if req.marker is not None and not req.marker.evaluate():
                continue
            pinned = lock.get(canonicalize_name(req.name))
            if pinned is None:
                problems.append(f"{req.name} missing from {label}")
            elif not req.specifier.contains(pinned[0], prereleases=True):
                problems.append(f"{req.name}=={pinned[0]} in {label} outside {req.specifier}")
    assert problems == [], f"{problems}: {STALE}"


def test_runtime_lock_agrees_with_dev_lock(locks):
    """The image (requirements.lock) runs the same versions as CI (requirements-dev.lock)."""
    runtime, dev = locks
    assert {n: v[0] for n, v in runtime.items() if dev.get(n, ("",))[0] != v[0]} == {}


def test_installed_versions_equal_the_lock(locks):
    """This environment has exactly the versions of requirements-dev.lock."""
    _, dev = locks
    wrong = {}
    for name, (version, _, _) in dev.items():
        if name.startswith("*"):
            continue
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = None
        if installed != version:
            wrong[name] = (version, installed)
    assert wrong == {}, (f"installed versions differ from requirements-dev.lock "
                         f"(locked, installed): {wrong}; run scripts/setup.sh")
