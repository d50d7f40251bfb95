"""The hostile corpus (tests/data/hostile/MANIFEST.toml): every input gets its expected error,
through the upload path (REST 400 with the reason, or accepted and the analysis job failed with
it) and through the parser (ParseError text); nothing else escapes (no 500, no traceback)."""

from __future__ import annotations

import io
import struct
import tarfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATA, blkparse_lines

HOSTILE = DATA / "hostile"
CASES = tomllib.loads((HOSTILE / "MANIFEST.toml").read_text())["case"]


class _Zeros(io.RawIOBase):
    def __init__(self, n: int) -> None:
        self.n = n

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        k = min(len(b), self.n)
        b[:k] = bytes(k)
        self.n -= k
        return k


def generate(name: str, dest: Path) -> Path:
    """The big or binary inputs, built here instead of kept in the repository."""
    path = dest / name
    if name == "gzip_bomb.tar.gz":
        n = 100 * 2**20
        with tarfile.open(path, "w:gz", compresslevel=1) as t:
            info = tarfile.TarInfo("zeros.blkparse.txt")
            info.size = n
            t.addfile(info, io.BufferedReader(_Zeros(n)))
    elif name == "zip_bomb.zip":
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z, z.open("zeros.txt", "w") as f:
            for _ in range(100):
                f.write(bytes(2**20))
    elif name == "many_members.tar":
        with tarfile.open(path, "w") as t:
            for k in range(10001):
                t.addfile(tarfile.TarInfo(f"m{k}.txt"))
    elif name == "corrupt_pdu_len.blktrace.0":
        from workers.events import ACT_QUEUE, RWBS_READ, EventTable, make_dev
        from workers.traces.writers import encode_blktrace

        n = 1000
        table = EventTable({"time_ns": [1000 * (i + 1) for i in range(n)],
                            "seq": list(range(1, n + 1)), "dev": [make_dev(8, 0)] * n,
                            "cpu": [0] * n, "pid": [7] * n, "action": [ACT_QUEUE] * n,
                            "rwbs": [RWBS_READ] * n, "sector": [8 * i for i in range(n)],
                            "nr_sectors": [8] * n})
        data = bytearray(encode_blktrace(table, process_notes=False))
        struct.pack_into("<H", data, 480 + 46, 48 * 683)
        path.write_bytes(bytes(data))
    elif name == "huge_line.blkparse.txt":
        with open(path, "wb") as fh:
            fh.write(b"  8,0    0        1     0.000000000   843  Q   R 0 + 8 [dd] ")
            fh.write(b"x" * (20 * 2**20))
    elif name == "long_second_line.blkparse.txt":
        path.write_bytes(blkparse_lines([128 * i for i in range(1000)]) + b"y" * (2**20))
    else:
        raise AssertionError(f"no generator for {name}")
    return path


def case_file(case: dict[str, Any], tmp: Path) -> Path:
    if "generate" in case:
        return generate(case["generate"], tmp)
    return HOSTILE / case["file"]


IDS = [c.get("file") or c["generate"] for c in CASES]


def test_corpus_is_small_and_complete():
    """Files in the repository stay small (big ones are generated); every file has a case."""
    listed = {c["file"] for c in CASES if "file" in c}
    present = {p.name for p in HOSTILE.iterdir() if p.name != "MANIFEST.toml"}
    assert listed == present
    assert sum(p.stat().st_size for p in HOSTILE.iterdir()) < 200_000


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_parser_gives_the_expected_error(case, tmp_path):
    """workers.traces.ingest raises a ParseError with the expected text, nothing else."""
    from workers.errors import ParseError
    from workers.traces import ingest

    path = case_file(case, tmp_path)
    name = path.name
    with pytest.raises(ParseError) as ei:
        ingest([path], names=[name], strict=bool(case.get("strict")))
    assert case["error"] in ei.value.message


@pytest.mark.django_db
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_upload_path_gives_the_expected_error(case, tmp_path, api_client):
    """REST upload: 400 naming the reason, or 201 and the analysis job fails with it."""
    from django.core.files.uploadedfile import TemporaryUploadedFile

    from reviewapp.models import AnalysisJob
    from reviewapp.tasks import run_analysis

    path = case_file(case, tmp_path)
    upload = TemporaryUploadedFile(path.name, "application/octet-stream", path.stat().st_size,
                                   None)
    with open(path, "rb") as src:
        while chunk := src.read(1 << 20):
            upload.write(chunk)
    upload.seek(0)
    r = api_client.post("/api/v1/bundles/", {"files": [upload],
                                             "strict": "true" if case.get("strict") else ""},
                        format="multipart")
    upload.close()
    assert r.status_code == case["upload"], r.content[:400]
    body = r.json()
    if case["upload"] == 400:
        assert case["error"] in body["error"]
        return
    job = AnalysisJob.objects.get(bundle_id=body["id"])
    run_analysis(job.pk)
    job.refresh_from_db()
    assert job.state == "failed"
    assert case["error"] in job.error
    assert "Traceback" not in job.error
