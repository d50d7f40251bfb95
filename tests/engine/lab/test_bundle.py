"""Bundles: the guest's records of a real 6.1 raid5 case -> manifest + .tar.zst -> the ingester.

``tests/data/lab/guest_output`` is what the guest script wrote to the 9p share for one case
(kernel 6.1.0-57-amd64 under TCG: raid5, 4 disks, 64k chunk, md0 max_sectors_kb 512,
``dd if=/dev/md0 bs=1M count=20 iflag=direct``).
"""

from __future__ import annotations

import shutil
import tarfile
import tomllib
from pathlib import Path

import pytest
import zstandard

from workers.events import ACT_QUEUE
from workers.lab.bundle import (
    build_manifest,
    md_data_offset,
    md_member_sizes_of,
    parse_queue_limits,
    toml_dump,
    write_bundle,
)
from workers.lab.host import LabError
from workers.traces import ingest

DATA = Path(__file__).resolve().parents[2] / "data" / "lab" / "guest_output"
CASE = DATA / "cases" / "raid5_dd_1"


def _manifest(case_dir: Path = CASE) -> dict:
    return build_manifest(case_dir, stack_fields={"kind": "raid5", "chunk_kb": 64,
                                                  "layout": "left-symmetric", "raid_disks": 4},
                          workload={"command": "dd if=/dev/md0 of=/dev/null bs=1M count=20 "
                                               "iflag=direct", "kind": "dd"},
                          lab={"accel": "tcg"}, role="baseline")


def test_queue_limits_parse() -> None:
    """Active scheduler picked from the brackets, numbers as ints, per-hctx lines left out."""
    lim = parse_queue_limits((CASE / "queue_limits.txt").read_text())
    assert set(lim) == {"md0", "vda", "vdb", "vdc", "vdd"}
    assert lim["md0"]["max_sectors_kb"] == 512
    assert lim["vda"]["scheduler"] == "none" and lim["vda"]["nr_hw_queues"] == 2
    assert lim["vda"]["write_cache"] == "write back"
    assert "0" not in lim["vda"]


def test_manifest_states_stack_members_offset_and_limits() -> None:
    """Members in raid-disk order by major,minor; data offset from mdadm --examine."""
    m = _manifest()
    assert m["kernel"] == "6.1.0-57-amd64" and m["role"] == "baseline"
    assert m["stack"]["top"] == "9,0"
    assert m["stack"]["members"] == ["254,0", "254,16", "254,32", "254,48"]
    assert m["stack"]["data_offset_sectors"] == md_data_offset(
        (CASE / "md_examine.txt").read_text()) == 4096
    assert m["limits"]["9,0"]["max_sectors_kb"] == 512
    # md's /sys/block/md0/md/stripe_cache_size (the model's stripe cache of raid5 writes)
    assert m["stack"]["stripe_cache_size"] == 256
    assert m["devices"] == {"md0": "9,0", "vda": "254,0", "vdb": "254,16", "vdc": "254,32",
                            "vdd": "254,48"}
    assert m["lab"]["commands"][-1] == "mdadm --zero-superblock /dev/vda /dev/vdb /dev/vdc " \
                                       "/dev/vdd"
    assert tomllib.loads(toml_dump(m)) == m


def test_manifest_needs_the_device_list(tmp_path: Path) -> None:
    """A case that never built its stack has no devices.txt: a clear error."""
    (tmp_path / "cases" / "x").mkdir(parents=True)
    with pytest.raises(LabError, match="never built"):
        _manifest(tmp_path / "cases" / "x")


def test_bundle_uploads_as_is_and_the_ingester_reads_it(tmp_path: Path) -> None:
    """The .tar.zst holds traces, manifest, commands, uname; ingest sees every device."""
    archive = write_bundle(CASE, tmp_path, _manifest())
    assert archive.name == "raid5_dd_1.tar.zst"
    with zstandard.ZstdDecompressor().stream_reader(archive.open("rb")) as zr, \
            tarfile.open(fileobj=zr, mode="r|") as tar:
        names = sorted(m.name for m in tar)
    assert "raid5_dd_1/blkreview.toml" in names and "raid5_dd_1/commands.txt" in names
    assert "raid5_dd_1/uname.txt" in names and "raid5_dd_1/md0.blktrace.1" in names
    assert "raid5_dd_1/queue_limits.txt" not in names  # the manifest carries it, parsed
    result = ingest([archive])
    t = result.table
    assert result.manifest is not None and result.manifest.kernel == "6.1.0-57-amd64"
    assert result.manifest.stack["kind"] == "raid5" and result.manifest.role == "baseline"
    assert sorted(t.device_ids()) == sorted([(9 << 20), (254 << 20), (254 << 20) | 16,
                                             (254 << 20) | 32, (254 << 20) | 48])
    md0 = t.devices[9 << 20]
    assert md0.limits["max_sectors_kb"] == 512 and md0.limits["scheduler"] == "none"
    # 20 dd reads of 1 MiB reach md0 as 20 Q events of 2048 sectors
    q = (t.dev == (9 << 20)) & (t.action == ACT_QUEUE)
    assert int(q.sum()) == 20 and set(t.nr_sectors[q].tolist()) == {2048}
    # files of the directory next to the archive keep the logs too
    assert (tmp_path / "raid5_dd_1" / "output.txt").exists()


def test_empty_per_cpu_files_stay_out(tmp_path: Path) -> None:
    """An idle CPU's empty blktrace file is not copied (the ingester would warn about it)."""
    case = tmp_path / "cases" / "raid5_dd_1"
    shutil.copytree(CASE, case)
    shutil.copy2(DATA / "uname.txt", tmp_path / "uname.txt")
    (case / "md0.blktrace.0").write_bytes(b"")
    write_bundle(case, tmp_path / "out", _manifest(case))
    assert not (tmp_path / "out" / "raid5_dd_1" / "md0.blktrace.0").exists()


def test_loop_extent_map_reaches_the_manifest_and_the_archive(tmp_path: Path) -> None:
    """A loop case's ``filefrag -v`` record becomes ``[stack] file_extents`` (sectors) and
    travels in the archive; a failed filefrag leaves the manifest silent and says why."""
    fallocated = (DATA.parent / "loop_extents.txt").read_text()
    case = tmp_path / "cases" / "loop_dio"
    case.mkdir(parents=True)
    (case / "devices.txt").write_text("top loop0 7:0\nmember vda 254:0\n")
    (case / "loop_extents.txt").write_text(fallocated)
    (case / "loop_extents_after.txt").write_text("# filefrag -v after the workload\n"
                                                 + fallocated)
    m = build_manifest(case, stack_fields={"kind": "loop", "direct_io": True, "fs": "ext4"},
                       workload={"command": "dd", "kind": "dd"}, lab={"notes": []})
    st = m["stack"]
    assert st["top"] == "7,0" and st["members"] == ["254,0"]
    assert st["file_block_bytes"] == 4096 and st["file_size_bytes"] == 512 << 20
    assert st["file_extents"][0] == [0, 6686720 * 8, 30720 * 8, 1]
    assert len(st["file_extents"]) == 5
    assert tomllib.loads(toml_dump(m)) == m
    archive = write_bundle(case, tmp_path / "out", m)
    with zstandard.ZstdDecompressor().stream_reader(archive.open("rb")) as zr, \
            tarfile.open(fileobj=zr, mode="r|") as tar:
        names = {x.name for x in tar}
    assert {"loop_dio/loop_extents.txt", "loop_dio/loop_extents_after.txt"} <= names
    (case / "loop_extents.txt").write_text("bash: filefrag: command not found\n")
    m = build_manifest(case, stack_fields={"kind": "loop"}, workload={}, lab={"notes": []})
    assert "file_extents" not in m["stack"]
    assert any("filefrag" in n for n in m["lab"]["notes"])


FIDELITY = Path(__file__).resolve().parents[2] / "data" / "fidelity"


def test_md_raid10_and_linear_sizes_reach_the_manifest(tmp_path: Path) -> None:
    """raid10's far copies lie geo.stride into every member (calc_sectors over the array's one
    mddev->dev_sectors): every member gets the examined member's data size, though mdadm
    --examine ran on one member only; raid5 gets none (its mapping needs no size)."""
    case = tmp_path / "r10"
    shutil.copytree(FIDELITY / "6.1.0-57-amd64" / "r10f2_d3_c64_ddw256k", case)
    (case / "blkreview.toml").unlink()
    assert (case / "md_examine.txt").read_text().count("Avail Dev Size") == 1
    m = build_manifest(case, stack_fields={"kind": "raid10", "chunk_kb": 64, "layout": "f2",
                                           "raid_disks": 3},
                       workload={"command": "dd", "kind": "dd"}, lab={}, role="")
    assert m["stack"]["sizes_sectors"] == [2093056] * 3
    assert md_member_sizes_of(case, "raid5") == ()
    assert "sizes_sectors" not in _manifest()["stack"]
