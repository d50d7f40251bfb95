"""Safe archive unpacking and bundle ingestion."""

from __future__ import annotations

import io
import lzma
import tarfile
import zipfile
from pathlib import Path

import pytest
import zstandard

from workers.errors import UnpackError
from workers.traces import ingest
from workers.traces.unpack import UnpackLimits, unpack_archive

G_LINE = b"8,0 0 1 0.000000001 843 G R 14071424 + 128 [dd]\n"


def _tar(path: Path, members: dict[str, bytes], mode: str = "w") -> Path:
    with tarfile.open(path, mode) as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def _tar_with(path: Path, info: tarfile.TarInfo) -> Path:
    with tarfile.open(path, "w") as tf:
        tf.addfile(info, io.BytesIO(b""))
    return path


@pytest.mark.parametrize("mode", ["w", "w:gz", "w:xz", "w:bz2"])
def test_tar_bundles(tmp_path: Path, data_dir: Path, mode: str) -> None:
    """tar, tar.gz, tar.xz, tar.bz2 bundles with per-CPU files and a manifest ingest."""
    members = {"run1/demo.blktrace.0": (data_dir / "demo.blktrace.0").read_bytes(),
               "run1/demo.blktrace.1": (data_dir / "demo.blktrace.1").read_bytes(),
               "blkreview.toml": b'kernel = "6.1.0-57-amd64"\nrole = "baseline"\n',
               "README": b"free text that is no trace\n"}
    archive = _tar(tmp_path / "bundle.upload", members, mode)
    result = ingest([archive], names=["bundle.tar"])
    assert len(result.table) == 29
    assert result.manifest is not None and result.manifest.role == "baseline"
    names = {f.name: f.format for f in result.files}
    assert names["bundle.tar:run1/demo.blktrace.0"] == "blktrace"
    assert names["bundle.tar:README"] == "unknown"
    assert any("README" in w for w in result.warnings)


def test_tar_zst_bundle(tmp_path: Path) -> None:
    """A zstd-compressed tar is streamed through zstandard."""
    raw = _tar(tmp_path / "b.tar", {"a/trace.txt": G_LINE * 3})
    zst = tmp_path / "b.tar.zst"
    zst.write_bytes(zstandard.ZstdCompressor().compress(raw.read_bytes()))
    assert len(ingest([zst], names=["b.tar.zst"]).table) == 3


def test_zip_bundle(tmp_path: Path) -> None:
    """A zip with a trace in a folder ingests."""
    p = tmp_path / "b.zip"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("x/trace.txt", G_LINE * 2)
    assert len(ingest([p]).table) == 2


def test_single_xz_file(tmp_path: Path) -> None:
    """A compressed single file (vda.blkparse.txt.xz) is read as one member."""
    p = tmp_path / "vda.blkparse.txt.xz"
    p.write_bytes(lzma.compress(G_LINE * 4))
    result = ingest([p], names=["vda.blkparse.txt.xz"])
    assert len(result.table) == 4
    assert result.files[-1].name == "vda.blkparse.txt.xz:vda.blkparse.txt"


@pytest.mark.parametrize(("member", "reason"), [
    ("../evil.txt", "path traversal"),
    ("a/../../evil.txt", "path traversal"),
    ("/etc/passwd", "absolute path"),
])
def test_path_traversal_refused(tmp_path: Path, member: str, reason: str) -> None:
    """Members escaping the bundle are refused with the member name and the reason."""
    archive = _tar(tmp_path / "t.tar", {member: G_LINE})
    with pytest.raises(UnpackError) as ei:
        ingest([archive], names=["t.tar"])
    assert ei.value.path == "t.tar"
    assert reason in ei.value.reason and member in ei.value.reason
    assert not (tmp_path / "evil.txt").exists()


@pytest.mark.parametrize(("kind", "reason"), [
    (tarfile.SYMTYPE, "links are not allowed"),
    (tarfile.LNKTYPE, "links are not allowed"),
    (tarfile.CHRTYPE, "device files"),
    (tarfile.BLKTYPE, "device files"),
    (tarfile.FIFOTYPE, "device files"),
])
def test_links_and_devices_refused(tmp_path: Path, kind: bytes, reason: str) -> None:
    """Symlinks, hard links, device nodes and FIFOs are refused."""
    info = tarfile.TarInfo("x")
    info.type = kind
    info.linkname = "/etc/passwd"
    archive = _tar_with(tmp_path / "t.tar", info)
    with pytest.raises(UnpackError, match=reason):
        unpack_archive(archive, tmp_path / "out", name="t.tar", kind="tar")


def test_zip_symlink_refused(tmp_path: Path) -> None:
    """A zip member flagged as a symlink is refused."""
    p = tmp_path / "l.zip"
    with zipfile.ZipFile(p, "w") as zf:
        info = zipfile.ZipInfo("link")
        info.external_attr = (0o120777 << 16)
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(UnpackError, match="links"):
        unpack_archive(p, tmp_path / "out", name="l.zip", kind="zip")


def test_member_count_limit(tmp_path: Path) -> None:
    """More members than allowed is refused."""
    archive = _tar(tmp_path / "t.tar", {f"f{i}": b"x" for i in range(6)})
    with pytest.raises(UnpackError, match="more than 5 members"):
        unpack_archive(archive, tmp_path / "o", name="t.tar", kind="tar",
                       limits=UnpackLimits(max_members=5))


def test_total_size_limit(tmp_path: Path) -> None:
    """Uncompressed bytes beyond the limit are refused (counted, not taken from headers)."""
    archive = _tar(tmp_path / "t.tar", {"a": b"x" * 3000, "b": b"y" * 3000})
    with pytest.raises(UnpackError, match="uncompressed size over 5000"):
        unpack_archive(archive, tmp_path / "o", name="t.tar", kind="tar",
                       limits=UnpackLimits(max_total_bytes=5000))


def test_compression_ratio_bomb(tmp_path: Path) -> None:
    """A highly compressible member trips the ratio limit (decompression bomb)."""
    archive = _tar(tmp_path / "t.tar.gz", {"zeros": b"\0" * (4 << 20)}, "w:gz")
    with pytest.raises(UnpackError, match="compression ratio"):
        unpack_archive(archive, tmp_path / "o", name="t.tar.gz", kind="tar",
                       limits=UnpackLimits(max_ratio=50, ratio_grace_bytes=1 << 20))


def test_duplicate_member_refused(tmp_path: Path) -> None:
    """A second member with the same name cannot overwrite the first."""
    p = tmp_path / "d.tar"
    with tarfile.open(p, "w") as tf:
        for data in (b"a", b"b"):
            info = tarfile.TarInfo("same")
            info.size = 1
            tf.addfile(info, io.BytesIO(data))
    with pytest.raises(UnpackError, match="appears twice"):
        unpack_archive(p, tmp_path / "o", name="d.tar", kind="tar")


def test_corrupt_archive(tmp_path: Path) -> None:
    """A truncated tar.gz is an UnpackError, not a zlib/EOF exception."""
    archive = _tar(tmp_path / "t.tar.gz", {"a": bytes(range(256)) * 400}, "w:gz")
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    with pytest.raises(UnpackError, match="corrupt"):
        ingest([archive], names=["t.tar.gz"])


def test_corrupt_zip_deflate_stream(tmp_path: Path) -> None:
    """Damaged deflate data inside a zip is an UnpackError, not zlib.error (found by fuzzing)."""
    p = tmp_path / "b.zip"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("t/demo.txt", bytes(range(256)) * 64)
    data = bytearray(p.read_bytes())
    start = 30 + len("t/demo.txt")
    for i in range(start, start + 40):
        data[i] ^= 0xFF
    p.write_bytes(bytes(data))
    with pytest.raises(UnpackError, match="corrupt zip"):
        ingest([p], names=["b.zip"])


def test_ingested_bundle_saves_as_npz(tmp_path: Path, data_dir: Path) -> None:
    """The merged table of a bundle (meta: files, manifest, diagnostics) round-trips .npz."""
    from workers.events import EventTable

    members = {"demo.blktrace.0": (data_dir / "demo.blktrace.0").read_bytes(),
               "demo.blktrace.1": (data_dir / "demo.blktrace.1").read_bytes(),
               "blkreview.toml": (data_dir / "k61_raid5_blkreview.toml").read_bytes()}
    result = ingest([_tar(tmp_path / "b.tar", members)], names=["b.tar"])
    back = EventTable.from_bytes(result.table.to_bytes())
    assert len(back) == 29 and back.meta["manifest"]["kernel"] == "6.1.0-57-amd64"
    assert back.comms == result.table.comms


def test_capture_folder_with_text_copies(tmp_path: Path, data_dir: Path) -> None:
    """A folder with per-CPU binaries and blkparse's text of them counts each event once."""
    members = {"run/demo.blktrace.0": (data_dir / "demo.blktrace.0").read_bytes(),
               "run/demo.blktrace.1": (data_dir / "demo.blktrace.1").read_bytes(),
               "run/demo.blkparse.txt": (data_dir / "demo.blkparse.txt").read_bytes()}
    result = ingest([_tar(tmp_path / "b.tar", members)], names=["b.tar"])
    assert len(result.table) == 29
    skipped = [f for f in result.files if f.name.endswith("demo.blkparse.txt")]
    assert skipped[0].error.startswith("skipped: a text copy of the binary trace")
