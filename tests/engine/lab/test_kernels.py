"""Kernel lookup: the private apt configuration, version resolution, local builds."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from workers.lab.host import LabError
from workers.lab.kernels import (
    Archive,
    PrivateApt,
    available_versions,
    bzimage_version,
    host_archive,
    local_kernel,
    resolve_version,
    sources_list_text,
)

VERSIONS = ["6.1.0-56-amd64", "6.1.0-57-amd64", "6.12.117+deb13-amd64",
            "6.17.13+deb13-amd64", "6.18.15+deb13-amd64", "7.2.13+deb14-amd64"]


def test_host_archive_reads_deb822_and_one_line_sources(tmp_path: Path) -> None:
    """The Debian archive and its security archive are taken from the host's sources."""
    d = tmp_path / "sources.list.d"
    d.mkdir()
    (d / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\n\nTypes: deb\nURIs: http://mirror.example/debian-security\n"
        "Suites: bookworm-security\nComponents: main\n")
    (d / "other.list").write_text("deb https://packages.example/apt cloud-sdk main\n")
    arch = host_archive(d, tmp_path / "none.list")
    assert arch == Archive("http://mirror.example/debian", "http://mirror.example/debian-security",
                           ("bookworm", "bookworm-updates", "bookworm-security"))
    text = sources_list_text(arch, ("trixie", "trixie-backports", "sid"))
    lines = text.splitlines()
    assert lines[0].endswith("http://mirror.example/debian bookworm main")
    assert any(ln.endswith("/debian sid main") for ln in lines)
    assert any(ln.endswith("/debian trixie-backports main") for ln in lines)
    assert any(ln.endswith("/debian-security trixie-security main") for ln in lines)
    assert not any("sid-security" in ln or "packages.example" in ln for ln in lines)


def test_host_archive_falls_back_to_debian(tmp_path: Path) -> None:
    """No Debian source configured: deb.debian.org."""
    assert host_archive(tmp_path, tmp_path / "x").main == "http://deb.debian.org/debian"


def test_private_apt_never_points_at_the_host_state(tmp_path: Path) -> None:
    """Lists, cache, status and sources all live under the private root."""
    apt = PrivateApt(tmp_path, Archive("http://m/debian", "", ("bookworm",)))
    opts = " ".join(apt.options())
    assert f"Dir::State::Lists={tmp_path}/lists" in opts
    assert f"Dir::Cache={tmp_path}/cache" in opts
    assert "Dir::State::status=/dev/null" in opts and "Dir::Etc::SourceParts=/dev/null" in opts
    assert "/var/lib/apt" not in opts and "/etc/apt" not in opts


class _FakeNames:
    """Stands in for apt's package-name index (the name list is data, not a service)."""

    def pkgnames(self, prefix: str) -> list[str]:
        names = ["linux-image-6.1.0-57-amd64", "linux-image-6.1.0-57-cloud-amd64",
                 "linux-image-6.1.0-57-amd64-dbg", "linux-image-6.12-amd64",
                 "linux-image-6.1.0-56-amd64", "linux-binary-7.2.13+deb14-amd64",
                 "linux-image-7.2.13+deb14-amd64", "linux-image-amd64",
                 "linux-image-6.18.15+deb13-amd64-unsigned"]
        return [n for n in names if n.startswith(prefix)]


def test_available_versions_keeps_generic_amd64_kernels() -> None:
    """cloud/rt/dbg/unsigned flavours and metapackages are left out; sorted by version."""
    assert available_versions(_FakeNames()) == [  # type: ignore[arg-type]
        "6.1.0-56-amd64", "6.1.0-57-amd64", "7.2.13+deb14-amd64"]


def test_resolve_version() -> None:
    """Exact, without -amd64, or a prefix meaning the newest of that series."""
    assert resolve_version("6.1.0-57-amd64", VERSIONS) == "6.1.0-57-amd64"
    assert resolve_version("6.17.13+deb13", VERSIONS) == "6.17.13+deb13-amd64"
    assert resolve_version("6.1", VERSIONS) == "6.1.0-57-amd64"
    assert resolve_version("6.12", VERSIONS) == "6.12.117+deb13-amd64"
    with pytest.raises(LabError, match="not found.*offered: .*6.18.15"):
        resolve_version("6.19.99", VERSIONS)


def _bzimage(path: Path, version: str) -> Path:
    head = bytearray(0x4000)
    head[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", head, 0x20E, 0x1000)
    text = f"{version} (builder@host) #1 SMP".encode()
    head[0x1200:0x1200 + len(text)] = text
    path.write_bytes(bytes(head))
    return path


def test_local_build_version_from_the_bzimage_header(tmp_path: Path) -> None:
    """The version comes from the setup header; modules must match it."""
    img = _bzimage(tmp_path / "bzImage", "6.18.0-rc3-blk+")
    assert bzimage_version(img) == "6.18.0-rc3-blk+"
    mods = tmp_path / "inst" / "lib" / "modules" / "6.18.0-rc3-blk+"
    (mods / "kernel").mkdir(parents=True)
    k = local_kernel(img, tmp_path / "inst")
    assert k.version == "6.18.0-rc3-blk+" and k.modules == mods
    assert local_kernel(img, None).modules is None
    other = tmp_path / "lib" / "modules" / "6.17.0"
    (other / "kernel").mkdir(parents=True)
    with pytest.raises(LabError, match="are for 6.17.0"):
        local_kernel(img, other)
    (tmp_path / "notakernel").write_bytes(b"\0" * 4096)
    with pytest.raises(LabError, match="not an x86 bzImage"):
        local_kernel(tmp_path / "notakernel", None)
    with pytest.raises(LabError, match="not found"):
        local_kernel(tmp_path / "missing", None)
