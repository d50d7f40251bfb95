"""Kernel lookup: the private apt configuration, version resolution, local builds."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from workers.lab.host import LabError
from workers.lab.kernels import (
    Archive,
    KernelUnbootable,
    PrivateApt,
    available_versions,
    bzimage_version,
    depends_groups,
    fetch_debian,
    host_archive,
    local_kernel,
    missing_boot_packages,
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


# `apt-cache show` of two images as trixie-backports offered them on 2026-12-01 (Depends kept
# whole, other fields trimmed): 6.19.14's modules package never reached the archive.
SHOW_6_19 = """Package: linux-image-6.19.14+deb13-amd64
Version: 6.19.14-1~bpo13+1
Depends: dracut | initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool, kmod,
 linux-base-6.19.14+deb13-amd64 (= 6.19.14-1~bpo13+1),
 linux-binary-6.19.14+deb13-amd64 (= 6.19.14-1~bpo13+1),
 linux-modules-6.19.14+deb13-amd64 (= 6.19.14-1~bpo13+1)
Pre-Depends: linux-base (>= 4.12~)
Suggests: grub-pc | grub-efi-amd64 | extlinux, linux-doc-6.19
"""
SHOW_6_1 = """Package: linux-image-6.1.0-57-amd64
Version: 6.1.192-3
Depends: kmod, linux-base (>= 4.3~), initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool
Suggests: linux-doc-6.1, debian-kernel-handbook, grub-pc | grub-efi-amd64 | extlinux
"""
V619 = "6.19.14+deb13-amd64"


def test_depends_groups_parse_alternatives_versions_and_folded_lines() -> None:
    """Alternatives stay grouped; constraints, arch qualifiers, Suggests are dropped."""
    assert depends_groups("Depends: a (>= 1), b | c:any\nSuggests: d\n") == [["a"], ["b", "c"]]
    groups = depends_groups(SHOW_6_19)
    assert ["dracut", "initramfs-tools", "linux-initramfs-tool"] in groups
    assert [f"linux-modules-{V619}"] in groups and [f"linux-binary-{V619}"] in groups
    assert ["linux-base"] in groups  # Pre-Depends counts too
    assert not any("grub-pc" in g for g in groups)
    assert depends_groups("Package: x\n") == []


def test_missing_boot_packages_names_the_absent_modules_package() -> None:
    """A split image whose modules package the archive lacks; an old one-package image."""
    names = {f"linux-image-{V619}", f"linux-binary-{V619}", f"linux-base-{V619}"}
    assert missing_boot_packages(SHOW_6_19, V619, names) == [f"linux-modules-{V619}"]
    assert missing_boot_packages(SHOW_6_19, V619, names | {f"linux-modules-{V619}"}) == []
    assert missing_boot_packages(SHOW_6_19, V619, {f"linux-image-{V619}"}) == [
        f"linux-binary-{V619}", f"linux-modules-{V619}"]
    assert missing_boot_packages(SHOW_6_1, "6.1.0-57-amd64", {"linux-image-6.1.0-57-amd64"}) \
        == []


class _SplitArchive:
    """The archive's package data for a split kernel (data, not a service); downloading
    anything fails the test: the check must come before any download."""

    def __init__(self, names: list[str], show: str) -> None:
        self.names, self.control = names, show
        self.downloads: list[str] = []

    def update(self, force: bool = False) -> None:
        pass

    def pkgnames(self, prefix: str) -> list[str]:
        return [n for n in self.names if n.startswith(prefix)]

    def show(self, package: str) -> str:
        return self.control if package == f"linux-image-{V619}" else ""

    def download(self, package: str, dest: Path) -> Path:
        self.downloads.append(package)
        raise AssertionError(f"downloaded {package}")


def test_fetch_debian_refuses_a_kernel_without_modules_before_downloading(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """6.19.14: found, but its modules package is missing -> KernelUnbootable, nothing fetched."""
    monkeypatch.setenv("BLKREVIEW_LAB_CACHE", str(tmp_path))
    apt = _SplitArchive([f"linux-image-{V619}", f"linux-binary-{V619}"], SHOW_6_19)
    v = re.escape(V619)
    with pytest.raises(KernelUnbootable, match=rf"{v} cannot boot in the lab: .*offers "
                       rf"linux-image-{v} but not linux-modules-{v}") as info:
        fetch_debian("6.19.14+deb13", apt=apt)  # type: ignore[arg-type]
    assert info.value.version == V619
    assert apt.downloads == []
    assert not (tmp_path / "kernels" / V619).exists()


def test_fetch_debian_refuses_a_cached_kernel_without_modules(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel unpacked by an older lab without its modules is not handed to a boot."""
    monkeypatch.setenv("BLKREVIEW_LAB_CACHE", str(tmp_path))
    kdir = tmp_path / "kernels" / V619
    img = kdir / "root" / "usr/lib/modules" / V619 / "vmlinuz"
    img.parent.mkdir(parents=True)
    img.write_bytes(b"bz")
    (kdir / "ok").write_text(f"linux-image-{V619} linux-binary-{V619}\n")
    with pytest.raises(KernelUnbootable, match=re.escape(f"lib/modules/{V619}/kernel")):
        fetch_debian(V619)
    (img.parent / "kernel").mkdir()
    k = fetch_debian(V619)
    assert k.modules == img.parent and k.image == img
