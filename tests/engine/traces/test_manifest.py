"""Bundle manifests: blkreview.toml, raw sysfs queue values, /proc/mdstat."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from workers.errors import ParseError
from workers.events import make_dev
from workers.traces import ingest
from workers.traces.manifest import Manifest, load_mdstat, load_sysfs, load_toml_manifest


def test_kernel_sample_manifest(data_dir: Path) -> None:
    """The raid5 sample's blkreview.toml: kernel, stack, per-device limits."""
    m = load_toml_manifest(data_dir / "k61_raid5_blkreview.toml", "blkreview.toml")
    assert m.kernel == "6.1.0-57-amd64"
    assert m.stack["kind"] == "raid5" and m.stack["chunk_kb"] == 512
    assert len(m.stack["members"]) == 8
    assert m.limits["9,0"]["max_sectors_kb"] == 1024
    assert m.limits["254,0"]["max_sectors_kb"] == 1280
    assert m.limits["254,0"]["scheduler"] == "none"


def test_queue_limits_dump(data_dir: Path) -> None:
    """The '## /sys/block/X/queue' dump: values by device name, ints converted."""
    m = load_sysfs(data_dir / "k61_raid5_queue_limits.txt", "queue_limits.txt", Manifest())
    assert m.limits["md0"]["max_sectors_kb"] == 1024
    assert m.limits["vda"]["max_sectors_kb"] == 1280
    assert m.limits["md0"]["write_cache"] == "write back"


def test_mdstat(data_dir: Path) -> None:
    """/proc/mdstat: level, members in raid-disk order, chunk, algorithm."""
    m = load_mdstat(data_dir / "k61_raid5_mdstat", "mdstat", Manifest())
    assert m.md == [{"name": "md0", "state": "active", "level": "raid5",
                     "members": ["vda", "vdb", "vdc", "vdd", "vde", "vdf", "vdg", "vdh"],
                     "spares": [], "failed": [], "chunk_kb": 512, "algorithm": 2}]


def test_raw_sysfs_members_in_bundle(tmp_path: Path) -> None:
    """Archive members sys/block/<dev>/queue/<attr> and sys/block/<dev>/dev become limits
    keyed by major,minor, attached to the trace's device."""
    members = {
        "trace.txt": b"254,0 0 1 0.000000001 843 D R 0 + 1024 [dd]\n",
        "sys/block/vda/queue/max_sectors_kb": b"512\n",
        "sys/block/vda/queue/scheduler": b"[none] mq-deadline\n",
        "sys/block/vda/dev": b"254:0\n",
        "proc/mdstat": b"Personalities : \nunused devices: <none>\n",
    }
    p = tmp_path / "b.tar"
    with tarfile.open(p, "w") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    result = ingest([p], names=["b.tar"])
    assert result.manifest is not None
    info = result.table.devices[make_dev(254, 0)]
    assert info.name == "vda"
    assert info.limits["max_sectors_kb"] == 512
    assert info.limits["scheduler"] == "[none] mq-deadline"


def test_grep_style_sysfs(tmp_path: Path) -> None:
    """'grep . /sys/block/*/queue/*' output is read too."""
    p = tmp_path / "q.txt"
    p.write_text("/sys/block/sda/queue/max_sectors_kb:1280\n/sys/block/sda/queue/nr_requests:64\n")
    m = load_sysfs(p, "q.txt", Manifest())
    assert m.limits["sda"] == {"max_sectors_kb": 1280, "nr_requests": 64}


@pytest.mark.parametrize(("text", "reason", "line"), [
    ('kernel = "6.1"\n[stack\n', "invalid TOML", 2),
    ('kernel = "6.1"\nrole = "base', "invalid TOML", 2),  # "at end of document": last line
    ('kernel = "6.1"\n[stack]\nchunk_kb = nan\n', "nan or inf", 3),
    ('role = "maybe"\n', "role must be", None),
    ('[limits."8,0"]\nmax_sectors_kb = 1\n[limits]\n"bad dev!" = {}\n', "bad device", None),
])
def test_bad_manifest(tmp_path: Path, text: str, reason: str, line: int | None) -> None:
    """Invalid manifests are ParseErrors with a reason (and the TOML line when known)."""
    p = tmp_path / "blkreview.toml"
    p.write_text(text)
    with pytest.raises(ParseError) as ei:
        load_toml_manifest(p, "bundle.tar:blkreview.toml")
    assert reason in ei.value.reason and ei.value.path == "bundle.tar:blkreview.toml"
    assert ei.value.line == line


def test_manifest_dates_become_strings(tmp_path: Path) -> None:
    """TOML datetimes are kept as text so the manifest stores as JSON with the table."""
    import json

    p = tmp_path / "blkreview.toml"
    p.write_text('kernel = "6.1"\n[workload]\nwhen = 2026-11-29T21:40:07Z\n')
    m = load_toml_manifest(p, "blkreview.toml")
    assert m.workload["when"] == "2026-11-29 21:40:07+00:00"
    json.dumps(m.to_json())


def test_untraced_manifest_devices_not_added(tmp_path: Path, data_dir: Path) -> None:
    """Only traced devices get DeviceInfo; the manifest keeps the others' limits."""
    trace = tmp_path / "t.txt"
    trace.write_text("254,0 0 1 0.000000001 843 D R 0 + 1024 [dd]\n")
    result = ingest([trace, data_dir / "k61_raid5_blkreview.toml"])
    assert result.table.device_ids() == [make_dev(254, 0)]
    assert result.table.devices[make_dev(254, 0)].limits["max_sectors_kb"] == 1280
    assert result.manifest is not None and "254,112" in result.manifest.limits


def test_device_mapped_to_a_name_is_not_a_number(tmp_path: Path) -> None:
    """[devices] naming another name (not MAJ,MIN) maps nothing: a placeholder and a warning,
    not a ValueError out of the bpftrace parser."""
    trace = tmp_path / "bpf.txt"
    trace.write_text("117828811 dd 1475 0: blk_mq_start_request ublkb0 bio 0-4096\n")
    manifest = tmp_path / "blkreview.toml"
    manifest.write_text('[devices]\nublkb0 = "sda"\n')
    result = ingest([trace, manifest], names=["bpf.txt", "blkreview.toml"])
    assert result.table.dev.tolist() == [make_dev(0, 1)]
    assert any("ublkb0" in w and "placeholder" in w for w in result.warnings)
