"""``inspect``: a single .xz is labelled xz (not tar); a dropped text copy is announced."""

from __future__ import annotations

import shutil
from pathlib import Path

from workers.__main__ import main

TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"


def test_single_xz_file_is_labelled_xz_and_a_tar_xz_tar_xz(capsys, tmp_path) -> None:
    """vda.blkparse.txt.xz is one compressed file: "xz"; a compressed tar says "tar.xz"."""
    import tarfile

    assert main(["inspect", str(TRACES / "k61_vda.blkparse.txt.xz")]) == 0
    first = capsys.readouterr().out.splitlines()[0].split()
    assert first[1] == "xz", first
    archive = tmp_path / "run.tar.xz"
    with tarfile.open(archive, "w:xz") as tar:
        tar.add(TRACES / "demo.blkparse.txt", arcname="demo.blkparse.txt")
    assert main(["inspect", str(archive)]) == 0
    assert capsys.readouterr().out.splitlines()[0].split()[1] == "tar.xz"


def test_text_copy_of_a_binary_trace_is_announced(capsys, tmp_path) -> None:
    """A capture directory with blktrace files and their blkparse text: the text is skipped
    with a warning naming it; given explicitly, the file line says it was skipped and why."""
    for f in ("demo.blktrace.0", "demo.blktrace.1", "demo.blkparse.txt"):
        shutil.copy(TRACES / f, tmp_path / f)
    assert main(["inspect", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "demo.blkparse.txt: blkparse text beside the raw blktrace files" in captured.err
    assert "skipped" in captured.err
    files = [str(tmp_path / f) for f in ("demo.blktrace.0", "demo.blktrace.1",
                                         "demo.blkparse.txt")]
    assert main(["inspect", *files]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith(files[2]))
    assert "skipped: a text copy of the binary trace" in line
