"""Safe archive unpacking for uploaded bundles (.tar, .tar.gz, .tar.xz, .tar.bz2, .tar.zst, .zip).

A single compressed file that is not a tar (``vda.blkparse.txt.xz``) is decompressed as one
member named after the file without its extension.

An upload is hostile until proven otherwise. Members are streamed (the archive is read once,
front to back) and every one is checked before a byte is written:

* no absolute paths, no ``..`` components, no backslashes or NULs (path traversal);
* only regular files and directories: symlinks, hard links, device nodes and FIFOs are refused
  (a link could point a later member, or the parser, outside the bundle);
* limits on the number of members, each member's size, the total uncompressed size and the
  ratio of uncompressed to compressed bytes (decompression bombs). Sizes are counted on the
  bytes actually produced, not the sizes the headers claim.

Every refusal is an :class:`~workers.errors.UnpackError` naming the archive, the member and
the reason. Per-line length is limited by the text parsers (``_textio.MAX_LINE_BYTES``).
"""

from __future__ import annotations

import lzma
import stat
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, BinaryIO

from workers.errors import UnpackError

_CHUNK = 1 << 20


@dataclass(frozen=True)
class UnpackLimits:
    """Bounds for one archive. The defaults fit a week of per-CPU traces of a busy array."""

    max_members: int = 10_000
    max_member_bytes: int = 8 << 30
    max_total_bytes: int = 16 << 30
    #: uncompressed / compressed; blktrace binaries compress about 5-20x, text up to ~40x
    max_ratio: float = 200.0
    #: the ratio is only enforced once this many bytes were produced (tiny archives of
    #: repetitive text legitimately compress very well)
    ratio_grace_bytes: int = 64 << 20


DEFAULT_LIMITS = UnpackLimits()


def safe_member_name(raw: str, archive: str) -> str:
    """Normalised relative POSIX path of a member, or UnpackError for unsafe names."""
    if "\x00" in raw or "\\" in raw:
        raise UnpackError(archive, f"member {raw!r}: unsafe characters in name")
    name = raw
    while name.startswith("./"):
        name = name[2:]
    p = PurePosixPath(name)
    if p.is_absolute() or name.startswith("/"):
        raise UnpackError(archive, f"member {raw!r}: absolute path")
    if any(part == ".." for part in p.parts):
        raise UnpackError(archive, f"member {raw!r}: path traversal ('..')")
    parts = [q for q in p.parts if q not in ("", ".")]
    if not parts:
        raise UnpackError(archive, f"member {raw!r}: empty name")
    return "/".join(parts)


class _Budget:
    def __init__(self, archive: str, compressed: int, limits: UnpackLimits) -> None:
        self.archive = archive
        self.compressed = max(compressed, 1)
        self.limits = limits
        self.total = 0
        self.members = 0

    def member(self, name: str) -> None:
        self.members += 1
        if self.members > self.limits.max_members:
            raise UnpackError(self.archive,
                              f"more than {self.limits.max_members} members (at {name!r})")

    def add(self, name: str, n: int, member_total: int) -> None:
        self.total += n
        lim = self.limits
        if member_total > lim.max_member_bytes:
            raise UnpackError(self.archive, f"member {name!r} larger than "
                                            f"{lim.max_member_bytes} bytes")
        if self.total > lim.max_total_bytes:
            raise UnpackError(self.archive, f"uncompressed size over {lim.max_total_bytes} "
                                            f"bytes (at {name!r})")
        if self.total > lim.ratio_grace_bytes and self.total / self.compressed > lim.max_ratio:
            raise UnpackError(self.archive, f"compression ratio over {lim.max_ratio:g}:1 "
                                            f"(decompression bomb?) at {name!r}")


def _copy(src: IO[bytes], dest: Path, name: str, budget: _Budget) -> None:
    written = 0
    with open(dest, "xb") as out:
        while True:
            chunk = src.read(_CHUNK)
            if not chunk:
                break
            written += len(chunk)
            budget.add(name, len(chunk), written)
            out.write(chunk)


def _target(dest: Path, name: str, archive: str, seen: set[str]) -> Path:
    if name in seen:
        raise UnpackError(archive, f"member {name!r} appears twice")
    seen.add(name)
    target = dest.joinpath(*name.split("/"))
    root = dest.resolve()
    if root not in target.resolve().parents:
        raise UnpackError(archive, f"member {name!r}: resolves outside the bundle")
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def _open_stream(path: Path) -> BinaryIO:
    fh = open(path, "rb")
    head = fh.read(4)
    fh.seek(0)
    if head == b"\x28\xb5\x2f\xfd":
        import zstandard

        reader = zstandard.ZstdDecompressor().stream_reader(fh, closefd=True)
        return reader  # type: ignore[return-value]
    return fh


def unpack_tar(path: Path, dest: Path, *, name: str,
               limits: UnpackLimits = DEFAULT_LIMITS) -> list[tuple[Path, str]]:
    """Stream a (compressed) tar into ``dest``; return ``(file path, member name)`` pairs."""
    budget = _Budget(name, path.stat().st_size, limits)
    out: list[tuple[Path, str]] = []
    seen: set[str] = set()
    dest.mkdir(parents=True, exist_ok=True)
    if not _is_tar(path):
        return _unpack_single(path, dest, name=name, budget=budget)
    stream = _open_stream(path)
    try:
        with tarfile.open(fileobj=stream, mode="r|*") as tf:
            for member in tf:
                budget.member(member.name)
                if member.isdir():
                    safe_member_name(member.name, name)
                    continue
                if member.issym() or member.islnk():
                    raise UnpackError(name, f"member {member.name!r}: links are not allowed")
                if not member.isreg():
                    raise UnpackError(name, f"member {member.name!r}: device files, FIFOs and "
                                            "other special files are not allowed")
                mname = safe_member_name(member.name, name)
                target = _target(dest, mname, name, seen)
                src = tf.extractfile(member)
                if src is None:  # pragma: no cover - regular files always have data
                    raise UnpackError(name, f"member {mname!r}: unreadable")
                _copy(src, target, mname, budget)
                out.append((target, mname))
    except UnpackError:
        raise
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        raise UnpackError(name, f"corrupt or truncated tar archive: {exc}") from None
    except Exception as exc:  # zstandard.ZstdError and friends
        raise UnpackError(name, f"corrupt compressed archive: {exc}") from None
    finally:
        stream.close()
    return out


def _decompressed(path: Path) -> BinaryIO:
    """A stream of the decompressed content (gz, xz, bz2, zst) or the raw file."""
    import bz2
    import gzip

    with open(path, "rb") as fh:
        head = fh.read(6)
    if head[:2] == b"\x1f\x8b":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    if head[:6] == b"\xfd7zXZ\x00":
        return lzma.open(path, "rb")  # type: ignore[return-value]
    if head[:3] == b"BZh":
        return bz2.open(path, "rb")  # type: ignore[return-value]
    return _open_stream(path)


def _is_tar(path: Path) -> bool:
    """True when the (decompressed) content starts with a tar header ("ustar" at 257)."""
    try:
        with _decompressed(path) as fh:
            head = fh.read(512)
    except Exception:  # corrupt compressed data: let the tar reader report it
        return True
    if len(head) < 512:
        return False
    return head[257:262] == b"ustar" or _tar_checksum_ok(head)


def _tar_checksum_ok(block: bytes) -> bool:
    """Old (v7) tar headers have no "ustar" magic; check the header checksum instead."""
    try:
        stored = int(block[148:156].split(b"\x00", 1)[0].strip() or b"-1", 8)
    except ValueError:
        return False
    computed = sum(block[:148]) + 8 * 32 + sum(block[156:512])
    return stored == computed


def _unpack_single(path: Path, dest: Path, *, name: str,
                   budget: _Budget) -> list[tuple[Path, str]]:
    """A single compressed file (``trace.txt.xz``): decompress it as one member."""
    base = Path(name.rsplit(":", 1)[-1]).name
    for ext in (".gz", ".xz", ".zst", ".bz2", ".tgz"):
        if base.endswith(ext):
            base = base[: -len(ext)]
            break
    mname = safe_member_name(base or "member", name)
    target = _target(dest, mname, name, set())
    budget.member(mname)
    try:
        with _decompressed(path) as src:
            _copy(src, target, mname, budget)
    except UnpackError:
        raise
    except Exception as exc:  # EOFError, lzma.LZMAError, zlib.error, OSError, zstd errors
        raise UnpackError(name, f"corrupt compressed file: {exc}") from None
    return [(target, mname)]


def unpack_zip(path: Path, dest: Path, *, name: str,
               limits: UnpackLimits = DEFAULT_LIMITS) -> list[tuple[Path, str]]:
    """Extract a zip into ``dest`` with the same checks as :func:`unpack_tar`."""
    budget = _Budget(name, path.stat().st_size, limits)
    out: list[tuple[Path, str]] = []
    seen: set[str] = set()
    dest.mkdir(parents=True, exist_ok=True)
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                budget.member(info.filename)
                mode = info.external_attr >> 16
                if info.is_dir():
                    safe_member_name(info.filename, name)
                    continue
                if stat.S_ISLNK(mode):
                    raise UnpackError(name, f"member {info.filename!r}: links are not allowed")
                if stat.S_IFMT(mode) and not stat.S_ISREG(mode):
                    raise UnpackError(name, f"member {info.filename!r}: special files are "
                                            "not allowed")
                if info.flag_bits & 0x1:
                    raise UnpackError(name, f"member {info.filename!r}: encrypted")
                mname = safe_member_name(info.filename, name)
                target = _target(dest, mname, name, seen)
                with zf.open(info) as src:
                    _copy(src, target, mname, budget)
                out.append((target, mname))
    except UnpackError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError,
            NotImplementedError, zlib.error, lzma.LZMAError) as exc:
        raise UnpackError(name, f"corrupt zip archive: {exc}") from None
    return out


def compression_label(path: Path) -> str:
    """What an archive-looking file is, for reports: ``"tar.xz"`` style for a compressed tar,
    ``"xz"`` (``gz``, ``zst``, ``bz2``) for a single compressed file, ``"tar"`` for a plain one."""
    with open(path, "rb") as fh:
        head = fh.read(6)
    comp = ("gz" if head[:2] == b"\x1f\x8b" else "xz" if head[:6] == b"\xfd7zXZ\x00"
            else "zst" if head[:4] == b"\x28\xb5\x2f\xfd" else "bz2" if head[:3] == b"BZh"
            else "")
    if not comp:
        return "tar"
    return f"tar.{comp}" if _is_tar(path) else comp


def unpack_archive(path: Path, dest: Path, *, name: str, kind: str,
                   limits: UnpackLimits = DEFAULT_LIMITS) -> list[tuple[Path, str]]:
    """Unpack a ``"tar"`` or ``"zip"`` archive (kind from :func:`detect.sniff_archive`)."""
    if kind == "zip":
        return unpack_zip(path, dest, name=name, limits=limits)
    return unpack_tar(path, dest, name=name, limits=limits)
