"""The matrix data file, the upload client (against a real HTTP server on loopback), the CLI."""

from __future__ import annotations

import email.parser
import email.policy
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from workers.__main__ import main
from workers.lab.host import LabError
from workers.lab.matrix import SPLITS, load_matrix
from workers.lab.upload import multipart, submissions_url, upload_comparison

ROOT = Path(__file__).resolve().parents[3]
MATRIX = ROOT / "workers" / "lab" / "matrix.toml"


def test_project_matrix_covers_the_issue() -> None:
    """At least 5 kernels from 6.1 on, 12+ cases, every family the model claims, both splits."""
    m = load_matrix(MATRIX)
    assert len(m.kernels) >= 5 and m.kernels[0].startswith("6.1.")
    assert len(m.cases) >= 12
    families = {c.family for c in m.cases}
    for fam in ("raid5-read", "raid0-read", "raid10-read", "raid1-write", "raid5-write",
                "disk-scheduler", "plug-merge", "seed001-split", "seed002-discard",
                "seed003-tags", "writeback", "partition", "filesystem", "buffer-contiguity"):
        assert fam in families, fam
    assert {c.split for c in m.cases} == set(SPLITS)
    chunks = {c.case.stack.manifest.get("chunk_kb") for c in m.cases} - {None}
    assert min(chunks) == 64 and max(chunks) == 512
    disks = {c.case.stack.manifest.get("raid_disks") for c in m.cases} - {None}
    assert min(disks) == 2 and max(disks) == 8
    assert len(m.groups()) >= 2  # other disk specs (one queue, small segments) boot apart
    # the held-out families the model scored 0% on have calibration twins with other
    # parameters, so that their mechanism can be diagnosed without tuning on the held-out cells
    for fam in ("dm-crypt", "loop", "dm-linear", "filesystem"):
        assert {c.split for c in m.cases if c.family == fam} == set(SPLITS), fam
    cal = {c.case.name: c for c in m.cases if c.split == "calibration"}
    assert {"disk_mqdl_libaio_batch8_write4k", "r0_d2_c256_fstrim", "r0_d3_c128_fs_ddw512k"} \
        <= set(cal)  # session 5's twins of held-out cells below 95%
    assert cal["seg62_disk_dd512k"].disk == "depth=64"  # boots with seg62_disk_dd1M
    assert "top:max_sectors_kb=64" in [s.text for s in cal["r5_d4_c128_msk64_dd512k"].case.settings]


def test_matrix_errors(tmp_path: Path) -> None:
    """Duplicates, unknown keys, bad splits and bad stacks are named."""
    bad = tmp_path / "m.toml"
    for body, msg in (
        ('[[case]]\nname="a"\nstack="disk"\nworkload="dd bs=1M count=1"\n' * 2, "twice"),
        ('[[case]]\nname="a"\nstack="disk"\nworkload="dd bs=1M"\ncolour="red"\n', "colour"),
        ('[[case]]\nname="a"\nsplit="train"\nstack="disk"\nworkload="dd bs=1M"\n', "split"),
        ('[[case]]\nname="a"\nstack="raid9"\nworkload="dd bs=1M"\n', "matrix case a: unknown"),
        ('[[case]]\nname="a"\nworkload="dd bs=1M"\n', "stack is missing"),
        ('kernels = ["6.1"]\n', "no \\[\\[case\\]\\]"),
        ("kernels = [", "matrix"),
    ):
        bad.write_text(body)
        with pytest.raises(LabError, match=msg):
            load_matrix(bad)


class _Handler(http.server.BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + self.headers["Content-Type"].encode() + b"\r\n\r\n" + body)
        parts = {}
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            parts.setdefault(name, []).append(
                (part.get_filename(), part.get_payload(decode=True)))
        self.seen.append({"path": self.path, "auth": self.headers["Authorization"],
                          "parts": parts})
        if self.headers["Authorization"] != "Token good":
            self.send_response(401)
            self.end_headers()
            self.wfile.write(b'{"error": {"code": "not_authenticated"}}')
            return
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps({"id": 7, "url": "http://x/c/7/"}).encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.seen = []
    srv = http.server.HTTPServer(("127.0.0.1", 0), _Handler)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()
    srv.server_close()


def test_upload_posts_both_sides_as_one_submission(server: str, tmp_path: Path) -> None:
    """One multipart POST to /api/v1/submissions/ with both sides' archives and kernels."""
    a, b = tmp_path / "base.tar.zst", tmp_path / "patch.tar.zst"
    a.write_bytes(b"A" * 100)
    b.write_bytes(b"B" * 50)
    out = upload_comparison(server, "good", title="t", baseline=[a], patched=[b],
                            baseline_kernel="6.17.13+deb13-amd64",
                            patched_kernel="6.18.15+deb13-amd64", workload="dd", stack="raid5")
    assert out == {"id": 7, "url": "http://x/c/7/"}
    seen = _Handler.seen[0]
    assert seen["path"] == "/api/v1/submissions/" and seen["auth"] == "Token good"
    assert seen["parts"]["baseline_files"] == [("base.tar.zst", b"A" * 100)]
    assert seen["parts"]["patched_files"] == [("patch.tar.zst", b"B" * 50)]
    assert seen["parts"]["patched_kernel"][0][1] == b"6.18.15+deb13-amd64"
    with pytest.raises(LabError, match="HTTP 401.*not_authenticated"):
        upload_comparison(server, "bad", title="t", baseline=[a], patched=[b],
                          baseline_kernel="x", patched_kernel="y")
    with pytest.raises(LabError, match="failed"):
        upload_comparison("http://127.0.0.1:9", "good", title="t", baseline=[a], patched=[b],
                          baseline_kernel="x", patched_kernel="y", timeout=5)


def test_submissions_url_and_multipart_shape() -> None:
    """A base URL or the endpoint itself both work; the body ends with the closing boundary."""
    assert submissions_url("http://h:8000/") == "http://h:8000/api/v1/submissions/"
    assert submissions_url("http://h/api/v1/submissions") == "http://h/api/v1/submissions/"
    body, ctype = multipart([("title", "x")], [])
    boundary = ctype.split("boundary=")[1]
    assert body.endswith(f"--{boundary}--\r\n".encode())


def test_cli_errors_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """No kernel named, a bad stack, upload without a side: exit 1 with 'error: ...'."""
    assert main(["lab", "--out", str(tmp_path)]) == 1
    assert "say which kernel" in capsys.readouterr().err
    assert main(["lab", "--kernel", "6.1", "--stack", "raid9", "--out", str(tmp_path)]) == 1
    assert "unknown stack 'raid9'" in capsys.readouterr().err
    assert main(["lab", "--kernel", "6.1", "--upload", "http://x", "--token", "t",
                 "--out", str(tmp_path)]) == 1
    assert "--upload needs --baseline and --patched" in capsys.readouterr().err
    assert main(["lab", "--baseline", "6.1", "--out", str(tmp_path)]) == 1
    assert "--patched VERSION (or --patched-image) is missing" in capsys.readouterr().err
    assert main(["lab", "--kernel-image", str(tmp_path / "nope"), "--out", str(tmp_path)]) == 1
    assert "not found" in capsys.readouterr().err


def test_export_subset_keeps_ok_small_matching_cells(tmp_path: Path) -> None:
    """Only captured, small, matching cells are unpacked, under their split and kernel."""
    import io
    import tarfile

    import zstandard

    from workers.lab.matrix import export_subset

    def bundle(path: Path, case: str, size: int) -> None:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name, data in (("blkreview.toml", b'kernel = "x"\n'),
                               ("md0.blktrace.0", b"t" * size)):
                info = tarfile.TarInfo(f"{case}/{name}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        path.write_bytes(zstandard.ZstdCompressor().compress(buf.getvalue()))

    src = tmp_path / "src"
    cells = {}
    for kernel, case, split, ok, size in (
            ("6.1.0-57-amd64", "r5_a", "calibration", True, 100),
            ("6.1.0-57-amd64", "r5_b", "evaluation", True, 100),
            ("6.1.0-57-amd64", "r5_big", "evaluation", True, 10_000),
            ("6.1.0-57-amd64", "r5_failed", "evaluation", False, 100),
            ("7.2.13+deb14-amd64", "r5_a", "calibration", True, 100),
            ("7.2.13+deb14-amd64", "r0_x", "calibration", True, 100)):
        rel = f"{kernel}/{case}.tar.zst"
        (src / kernel).mkdir(parents=True, exist_ok=True)
        bundle(src / rel, case, size)
        cells[f"{kernel}/{case}"] = {"kernel": kernel, "case": case, "split": split,
                                     "ok": ok, "bundle": rel if ok else None}
    (src / "index.json").write_text(json.dumps({"cells": cells}))
    dest = tmp_path / "dest"
    kept = export_subset(src, dest, only=["^r5_"], max_bundle_bytes=1000)
    assert kept == ["6.1.0-57-amd64/r5_a", "6.1.0-57-amd64/r5_b", "7.2.13+deb14-amd64/r5_a"]
    got = dest / "evaluation/6.1.0-57-amd64/r5_b"
    assert (got / "md0.blktrace.0").read_bytes() == b"t" * 100
    assert (got / "blkreview.toml").exists()
    index = json.loads((dest / "index.json").read_text())["cells"]
    assert index["6.1.0-57-amd64/r5_a"]["bundle"] == "calibration/6.1.0-57-amd64/r5_a"
    with pytest.raises(LabError, match="no index.json"):
        export_subset(tmp_path / "nothing", dest)


def _unbootable_in_cache(cache: Path, version: str) -> None:
    """An unpacked Debian kernel whose modules package the archive lacked (image only)."""
    kdir = cache / "kernels" / version
    img = kdir / "root" / "usr/lib/modules" / version / "vmlinuz"
    img.parent.mkdir(parents=True)
    img.write_bytes(b"bz")
    (kdir / "ok").write_text(f"linux-image-{version} linux-binary-{version}\n")


def test_matrix_skips_an_unbootable_kernel_before_booting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A kernel without modules: one 'skipped' line (shown with --quiet too), listed in
    index.json's ``skipped``, no cell, exit 0; no VM, no guest root (PATH holds no qemu)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("BLKREVIEW_LAB_CACHE", str(cache))
    monkeypatch.setenv("PATH", str(tmp_path / "nobin"))
    for v in ("6.19.14+deb13-amd64", "7.0.13+deb13-amd64"):
        _unbootable_in_cache(cache, v)
    matrix = tmp_path / "m.toml"
    matrix.write_text('kernels = ["6.19.14+deb13", "7.0.13+deb13-amd64"]\n'
                      '[[case]]\nname="a"\nstack="disk"\nworkload="dd bs=1M count=1 '
                      'iflag=direct"\n')
    out = tmp_path / "out"
    assert main(["lab", "--matrix", str(matrix), "--out", str(out), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "[6.19.14+deb13-amd64] skipped: kernel 6.19.14+deb13-amd64 cannot boot" in err
    assert "[7.0.13+deb13-amd64] skipped:" in err
    index = json.loads((out / "index.json").read_text())
    assert index["cells"] == {}
    assert sorted(index["skipped"]) == ["6.19.14+deb13-amd64", "7.0.13+deb13-amd64"]
    assert "lib/modules/7.0.13+deb13-amd64/kernel" in index["skipped"]["7.0.13+deb13-amd64"]


def test_compare_checks_both_kernels_before_the_first_boot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """--baseline bootable, --patched unbootable: the error names the patched kernel before the
    baseline boots (with PATH empty a boot would fail on qemu instead)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("BLKREVIEW_LAB_CACHE", str(cache))
    monkeypatch.setenv("PATH", str(tmp_path / "nobin"))
    good = "6.18.15+deb13-amd64"
    _unbootable_in_cache(cache, good)
    (cache / "kernels" / good / "root" / "usr/lib/modules" / good / "kernel").mkdir()
    _unbootable_in_cache(cache, "7.0.13+deb13-amd64")
    assert main(["lab", "--baseline", good, "--patched", "7.0.13+deb13-amd64", "--accel", "tcg",
                 "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "error: kernel 7.0.13+deb13-amd64 cannot boot in the lab" in err
    assert "qemu" not in err
