"""Kernels for the lab: Debian kernel packages by version, or a local build.

Debian packages come through a *private* apt configuration under the cache directory: the host's
``/etc/apt`` state (lists, cache, status, locks) is never touched. Its sources are the host's
Debian archive (as configured in ``/etc/apt/sources.list.d``) plus the newer suites of the same
archive, where newer kernels live: trixie, trixie-updates, trixie-backports, sid (and their
security archive). ``BLKREVIEW_LAB_SUITES`` replaces that list of extra suites.

Package layouts differ: up to 7.0-ish one ``linux-image-<ver>`` holds ``boot/vmlinuz-<ver>``
and ``lib/modules/<ver>``; sid's 7.x image is a metapackage over ``linux-binary-<ver>``
(``usr/lib/modules/<ver>/vmlinuz``) and ``linux-modules-<ver>``.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from workers.lab.host import LabError, atomic_dir, cache_dir, need_tool, run

DEFAULT_SUITES = ("trixie", "trixie-updates", "trixie-backports", "sid")
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
_LIST_MAX_AGE_S = 12 * 3600
_VERSION_RE = re.compile(r"^\d+\.\d+[\w.+~-]*$")
#: packages of a split Debian kernel (sid/backports 6.19+: ``linux-image-<ver>`` is a metapackage
#: over these) without which the lab cannot boot it: the image itself and its modules
_BOOT_PARTS = ("linux-binary-", "linux-modules-")


class KernelUnbootable(LabError):
    """A kernel the lab cannot boot for any case (e.g. the archive lacks its modules package).

    Raised before anything boots, so that a matrix run skips the kernel with one clear line
    instead of booting it to find that virtio_blk, md and 9p are missing.
    """

    def __init__(self, message: str, version: str) -> None:
        super().__init__(message)
        #: the resolved ``uname -r`` (``6.19.14+deb13-amd64`` for ``--kernel 6.19.14``)
        self.version = version


@dataclass(frozen=True)
class Kernel:
    """A kernel ready to boot: ``uname -r``, the image and the modules directory (or None)."""

    version: str
    image: Path
    modules: Path | None
    source: str


@dataclass(frozen=True)
class Archive:
    """Debian archive URIs: the main archive and its security archive (may be empty)."""

    main: str
    security: str
    host_suites: tuple[str, ...]


def host_archive(sources_dir: Path = Path("/etc/apt/sources.list.d"),
                 sources_list: Path = Path("/etc/apt/sources.list")) -> Archive:
    """The Debian archive the host is configured with (deb822 ``.sources`` or one-line lists).

    Falls back to ``http://deb.debian.org/debian`` when no Debian source is configured.
    """
    entries: list[tuple[str, list[str]]] = []
    files = sorted(sources_dir.glob("*.sources")) if sources_dir.is_dir() else []
    for f in files:
        for stanza in re.split(r"\n\s*\n", f.read_text(errors="replace")):
            fields: dict[str, str] = {}
            for line in stanza.splitlines():
                if line.startswith("#") or ":" not in line:
                    continue
                key, _, value = line.partition(":")
                fields[key.strip().lower()] = value.strip()
            if fields.get("enabled", "yes").lower() == "no" or "deb" not in fields.get(
                    "types", "").split():
                continue
            for uri in fields.get("uris", "").split():
                entries.append((uri, fields.get("suites", "").split()))
    lists = [sources_list] + (sorted(sources_dir.glob("*.list")) if sources_dir.is_dir() else [])
    for f in lists:
        if not f.is_file():
            continue
        for line in f.read_text(errors="replace").splitlines():
            mo = re.match(r"^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", line)
            if mo:
                entries.append((mo.group(1), [mo.group(2)]))
    main = security = ""
    suites: list[str] = []
    for uri, sts in entries:
        if not re.search(r"/debian(-security)?/?$", uri):
            continue
        if uri.rstrip("/").endswith("-security"):
            security = security or uri
        else:
            main = main or uri
        suites.extend(s for s in sts if s not in suites)
    return Archive(main or "http://deb.debian.org/debian", security, tuple(suites))


def sources_list_text(archive: Archive, extra: tuple[str, ...] | None = None) -> str:
    """The private apt sources list: the host's suites plus the newer ones."""
    if extra is None:
        env = os.environ.get("BLKREVIEW_LAB_SUITES")
        extra = tuple(env.split()) if env else DEFAULT_SUITES
    opt = f"[signed-by={KEYRING}]" if Path(KEYRING).exists() else "[trusted=yes]"
    lines: list[str] = []
    main_suites = [s for s in archive.host_suites if not s.endswith("-security")]
    sec_suites = [s for s in archive.host_suites if s.endswith("-security")]
    for s in list(main_suites) + [s for s in extra if s not in main_suites]:
        lines.append(f"deb {opt} {archive.main} {s} main")
    if archive.security:
        stable_news = [f"{s}-security" for s in extra
                       if s not in ("sid", "unstable", "experimental") and "-" not in s]
        for s in sec_suites + [s for s in stable_news if s not in sec_suites]:
            lines.append(f"deb {opt} {archive.security} {s} main")
    return "\n".join(lines) + "\n"


class PrivateApt:
    """apt-get/apt-cache with every state directory under ``root`` (default: the cache)."""

    def __init__(self, root: Path | None = None, archive: Archive | None = None) -> None:
        self.root = root or cache_dir() / "apt"
        self.archive = archive or host_archive()
        self.sources = self.root / "sources.list"
        self.lists = self.root / "lists"
        self.cache = self.root / "cache"

    def options(self) -> list[str]:
        return ["-o", f"Dir::Etc::SourceList={self.sources}",
                "-o", "Dir::Etc::SourceParts=/dev/null",
                "-o", f"Dir::State::Lists={self.lists}",
                "-o", f"Dir::Cache={self.cache}",
                "-o", "Dir::State::status=/dev/null",
                "-o", "Dir::Etc::Preferences=/dev/null",
                "-o", "Dir::Etc::PreferencesParts=/dev/null",
                "-o", "APT::Architecture=amd64",
                "-o", "APT::Sandbox::User=root",
                "-o", "Debug::NoLocking=1"]

    def update(self, force: bool = False) -> None:
        """``apt-get update`` into the private lists when they are missing or half a day old."""
        need_tool("apt-get", "apt")
        text = sources_list_text(self.archive)
        stamp = self.root / "updated"
        fresh = (stamp.exists() and time.time() - stamp.stat().st_mtime < _LIST_MAX_AGE_S
                 and self.sources.exists() and self.sources.read_text() == text)
        if fresh and not force:
            return
        (self.lists / "partial").mkdir(parents=True, exist_ok=True)
        (self.cache / "archives" / "partial").mkdir(parents=True, exist_ok=True)
        self.sources.write_text(text)
        run(["apt-get", *self.options(), "-q", "update"], what="apt-get update (private lists)",
            timeout=600)
        stamp.touch()

    def show(self, package: str) -> str:
        """``apt-cache show PACKAGE``: its control stanzas (one per version offered)."""
        return run(["apt-cache", *self.options(), "show", package], what="apt-cache show")

    def pkgnames(self, prefix: str) -> list[str]:
        out = run(["apt-cache", *self.options(), "pkgnames", prefix], what="apt-cache pkgnames")
        return sorted(set(out.split()))

    def download(self, package: str, dest: Path) -> Path:
        """Download one package's .deb into ``dest`` and return its path."""
        dest.mkdir(parents=True, exist_ok=True)
        before = set(dest.glob("*.deb"))
        run(["apt-get", *self.options(), "-q", "download", package], cwd=dest,
            what=f"apt-get download {package}", timeout=1800)
        new = sorted(set(dest.glob("*.deb")) - before) or sorted(dest.glob(f"{package}_*.deb"))
        if not new:
            raise LabError(f"apt-get download {package}: no .deb appeared in {dest}")
        return new[0]


def _version_key(version: str) -> list[tuple[int, str]]:
    return [(int(p), "") if p.isdigit() else (-1, p) for p in re.split(r"[.+~-]", version)]


def available_versions(apt: PrivateApt) -> list[str]:
    """Every ``uname -r`` of a generic amd64 Debian kernel the private archive offers."""
    out: set[str] = set()
    for prefix in ("linux-image-", "linux-binary-"):
        for name in apt.pkgnames(prefix):
            ver = name[len(prefix):]
            if not ver.endswith("-amd64") or ver.endswith(("-cloud-amd64", "-rt-amd64")):
                continue
            if "dbg" in ver or "unsigned" in ver or not _VERSION_RE.match(ver):
                continue
            if not re.match(r"^\d+\.\d+\.\d+", ver):
                continue  # metapackages: linux-image-6.12-amd64
            out.add(ver)
    return sorted(out, key=_version_key)


def resolve_version(spec: str, versions: list[str]) -> str:
    """``6.1.0-57-amd64`` as is; ``6.17.13+deb13`` -> ``...-amd64``; ``6.1`` -> newest 6.1.

    Raises:
        LabError: nothing matches, with the closest versions offered.
    """
    spec = spec.strip()
    if spec in versions:
        return spec
    if f"{spec}-amd64" in versions:
        return f"{spec}-amd64"
    prefixed = [v for v in versions if v.startswith((spec + ".", spec + "-", spec + "+"))]
    if prefixed and re.fullmatch(r"\d+\.\d+(\.\d+)?", spec):
        return prefixed[-1]
    major = spec.split(".")[0]
    near = [v for v in versions if v.split(".")[0] == major][-12:] or versions[-12:]
    raise LabError(f"kernel {spec!r} not found in the Debian archive; offered: "
                   + ", ".join(near))


def depends_groups(control: str) -> list[list[str]]:
    """The ``Depends`` of control stanzas as alternative groups of package names.

    ``a (>= 1), b | c:any`` -> ``[["a"], ["b", "c"]]`` (version constraints and
    architecture qualifiers dropped); several stanzas (versions) are concatenated.
    """
    groups: list[list[str]] = []
    field_text = ""
    for line in [*control.splitlines(), ""]:
        if line[:1] in (" ", "\t") and field_text:
            field_text += " " + line.strip()
            continue
        if field_text:
            for group in field_text.split(","):
                names = [re.split(r"[\s(:\[]", alt.strip(), maxsplit=1)[0]
                         for alt in group.split("|")]
                if any(names):
                    groups.append([n for n in names if n])
            field_text = ""
        if line.lower().startswith(("depends:", "pre-depends:")):
            field_text = line.partition(":")[2].strip()
    return groups


def missing_boot_packages(control: str, version: str, names: set[str]) -> list[str]:
    """The image/modules packages ``linux-image-<version>`` depends on that the archive lacks.

    Debian's split kernels (``linux-image-<ver>`` a metapackage over ``linux-binary-<ver>`` and
    ``linux-modules-<ver>``) sometimes reach an archive with the modules package missing
    (6.19.14+deb13 and 7.0.13+deb13 in trixie-backports): such a kernel boots without
    virtio_blk, md or 9p, so the lab cannot use it. ``control`` is ``apt-cache show`` of the
    image package, ``names`` the package names the archive offers.
    """
    parts = tuple(f"{p}{version}" for p in _BOOT_PARTS)
    missing: list[str] = []
    for group in depends_groups(control):
        wanted = [n for n in group if n in parts]
        if wanted and not any(n in names for n in group):
            missing.extend(n for n in wanted if n not in missing)
    return missing


def _unbootable(version: str, missing: list[str], image_pkg: str) -> KernelUnbootable:
    return KernelUnbootable(
        f"kernel {version} cannot boot in the lab: the Debian archive offers {image_pkg} but "
        f"not {', '.join(missing)}, which it depends on (its virtio, md, dm and 9p drivers are "
        "modules); pick another version (--list-kernels)", version)


def _find_image(root: Path, version: str) -> Path | None:
    for cand in (root / "boot" / f"vmlinuz-{version}",
                 root / "usr/lib/modules" / version / "vmlinuz",
                 root / "lib/modules" / version / "vmlinuz"):
        if cand.is_file():
            return cand
    return None


def _find_modules(root: Path, version: str) -> Path | None:
    for cand in (root / "lib/modules" / version, root / "usr/lib/modules" / version):
        if (cand / "kernel").is_dir():
            return cand
    return None


def fetch_debian(spec: str, *, apt: PrivateApt | None = None,
                 progress: object = None) -> Kernel:
    """A Debian kernel by version, downloaded and unpacked once into the cache.

    Raises:
        KernelUnbootable: the archive lacks the kernel's modules package (checked before any
            download), or an unpacked kernel has no modules directory.
        LabError: the version is not in the archive, or a download/unpack failed.
    """
    kroot = cache_dir() / "kernels"
    # an exact version already unpacked needs no network
    for cand in (spec, f"{spec}-amd64"):
        done = kroot / cand / "root"
        if (kroot / cand / "ok").exists():
            img = _find_image(done, cand)
            if img:
                return _debian_kernel(cand, img, done)
    apt = apt or PrivateApt()
    _say(progress, "kernel: updating the private package lists")
    apt.update()
    version = resolve_version(spec, available_versions(apt))
    final = kroot / version
    if (final / "ok").exists():
        img = _find_image(final / "root", version)
        if img:
            return _debian_kernel(version, img, final / "root")
    names = set(apt.pkgnames("linux-"))
    image_pkg = f"linux-image-{version}"
    if image_pkg in names:
        missing = missing_boot_packages(apt.show(image_pkg), version, names)
        if missing:
            raise _unbootable(version, missing, image_pkg)
    need_tool("dpkg-deb", "dpkg")
    tmp = atomic_dir(final)
    packages = [p for p in (f"linux-image-{version}", f"linux-binary-{version}",
                            f"linux-modules-{version}") if p in names]
    for pkg in packages:
        _say(progress, f"kernel: downloading {pkg}")
        deb = apt.download(pkg, tmp / "debs")
        run(["dpkg-deb", "-x", str(deb), str(tmp / "root")], what=f"dpkg-deb -x {deb.name}")
    img = _find_image(tmp / "root", version)
    if img is None:
        raise LabError(f"kernel {version}: no vmlinuz in {', '.join(packages)}")
    if _find_modules(tmp / "root", version) is None:
        shutil.rmtree(tmp, ignore_errors=True)
        raise KernelUnbootable(f"kernel {version} cannot boot in the lab: no lib/modules/"
                               f"{version}/kernel in {', '.join(packages)} (its virtio, md, dm "
                               "and 9p drivers are modules); pick another version", version)
    shutil.rmtree(tmp / "debs", ignore_errors=True)
    (tmp / "ok").write_text(" ".join(packages) + "\n")
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    img = _find_image(final / "root", version)
    assert img is not None
    return _debian_kernel(version, img, final / "root")


def _debian_kernel(version: str, image: Path, root: Path) -> Kernel:
    """An unpacked Debian kernel; one without modules (unpacked by an older lab) cannot boot."""
    mods = _find_modules(root, version)
    if mods is None:
        raise KernelUnbootable(f"kernel {version} cannot boot in the lab: its unpacked packages "
                               f"({root}) hold no lib/modules/{version}/kernel (the archive "
                               "lacks its modules package?); pick another version", version)
    return Kernel(version, image, mods, f"Debian package ({version})")


def bzimage_version(image: Path) -> str | None:
    """The version string an x86 bzImage carries (setup header ``kernel_version``), if any.

    ``boot_params.hdr.kernel_version`` at offset 0x20e points (+0x200) to a NUL-terminated
    string that starts with ``uname -r`` (Documentation/arch/x86/boot.rst).
    """
    try:
        with image.open("rb") as f:
            head = f.read(0x8000)
    except OSError:
        return None
    if len(head) < 0x210 or head[0x202:0x206] != b"HdrS":
        return None
    (off,) = struct.unpack_from("<H", head, 0x20E)
    start = off + 0x200
    if not off or start >= len(head):
        return None
    text = head[start:start + 256].split(b"\0", 1)[0].decode("ascii", "replace")
    return text.split()[0] if text.strip() else None


def local_kernel(image: Path, modules: Path | None) -> Kernel:
    """A maintainer's build: ``arch/x86/boot/bzImage`` and ``--modules`` (``lib/modules/<ver>``
    or an ``INSTALL_MOD_PATH`` root holding it).

    Raises:
        LabError: the image is missing or not a bzImage, or the modules directory is unusable.
    """
    if not image.is_file():
        raise LabError(f"kernel image {image} not found")
    version = bzimage_version(image)
    if version is None:
        raise LabError(f"{image} is not an x86 bzImage (no HdrS setup header)")
    mods: Path | None = None
    if modules is not None:
        if not modules.is_dir():
            raise LabError(f"modules directory {modules} not found")
        if (modules / "kernel").is_dir():
            mods = modules
        else:
            for cand in (modules / "lib/modules" / version, modules / "usr/lib/modules" / version,
                         modules / version):
                if (cand / "kernel").is_dir():
                    mods = cand
                    break
            if mods is None:
                raise LabError(f"{modules}: no kernel/ directory for {version} (give "
                               "lib/modules/<version> or the INSTALL_MOD_PATH root)")
        if mods.name != version:
            raise LabError(f"modules in {mods} are for {mods.name}, the image is {version}")
    return Kernel(version, image, mods, f"local build ({image})")


def _say(progress: object, text: str) -> None:
    if callable(progress):
        progress(text)
