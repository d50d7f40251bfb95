"""Stack, workload, setting and disk specs: what a user types -> the guest commands."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from workers.lab.host import LabError
from workers.lab.qemu import DiskSpec, parse_disk_spec, qemu_command
from workers.lab.script import Case, guest_script, ordered_settings, parse_setting
from workers.lab.stacks import parse_size, parse_stack
from workers.lab.workloads import parse_workload


def test_parse_size_units() -> None:
    """k/M/G are binary, s is 512-byte sectors, a bare number takes the given unit."""
    assert parse_size("64k") == 65536
    assert parse_size("2048s") == 1 << 20
    assert parse_size("1G") == 1 << 30
    assert parse_size("64", unit=1024) == 65536
    with pytest.raises(LabError, match="bad size"):
        parse_size("lots")


def test_raid5_stack_builds_the_mdadm_command() -> None:
    """raid5:disks=8,chunk=64k -> mdadm --create with every member, no resync, no bitmap."""
    st = parse_stack("raid5:disks=8,chunk=64k")
    assert st.disks == 8 and st.top == "/dev/md0"
    create = st.build[0]
    assert "--level=5" in create and "--raid-devices=8" in create and "--chunk=64" in create
    assert "--assume-clean" in create and "--bitmap=none" in create
    assert create.endswith(" ".join(f"$D{i}" for i in range(8)))
    assert st.manifest == {"kind": "raid5", "raid_disks": 8, "chunk_kb": 64,
                           "layout": "left-symmetric"}
    assert st.trace == [f"$D{i}" for i in range(8)]
    assert st.modules == ["raid456"]


def test_raid10_layouts_and_degraded_arrays() -> None:
    """raid10 far/offset layouts are named for mdadm and stated in the manifest; a degraded
    array is created with 'missing' slots and records them."""
    far = parse_stack("raid10:disks=4,chunk=128k,layout=f2")
    assert "--layout=f2" in far.build[0]
    assert far.manifest["raid10_far"] == 2 and far.manifest["raid10_near"] == 1
    off = parse_stack("raid10:disks=3,layout=offset2")
    assert off.manifest["layout"] == "o2" and off.manifest["raid10_offset"] is True
    deg = parse_stack("raid5:disks=4,degraded=1")
    assert deg.build[0].endswith("$D0 $D1 $D2 missing")
    assert deg.disks == 3 and deg.manifest["missing_slots"] == [3]
    with pytest.raises(LabError, match="survives 1 missing"):
        parse_stack("raid5:disks=4,degraded=2")


@pytest.mark.parametrize("spec,message", [
    ("raid7:disks=3", "unknown stack"),
    ("raid6:disks=3", "at least 4 disks"),
    ("raid0:disks=2,chunk=48k", "power of two"),
    ("raid5:disks=4,colour=red", "unknown parameter"),
    ("raid0:disks=two", "not a number"),
    ("raid10:layout=x3", "raid10 layout"),
    ("null_blk:gb=1;reboot", "bad module parameter"),
    ("disk:chunk=64k", "unknown parameter"),
])
def test_bad_stacks_are_refused_with_a_reason(spec: str, message: str) -> None:
    """Each mistake names itself."""
    with pytest.raises(LabError, match=message):
        parse_stack(spec)


def test_other_stacks() -> None:
    """Partition, dm, loop, null_blk and scsi_debug: top device, traced members, manifest."""
    part = parse_stack("partition:start=63s")
    assert part.top == "${D0}1" and part.manifest["start_sector"] == 63
    assert part.trace == []
    stripe = parse_stack("dm-stripe:disks=3,chunk=64k")
    assert "striped 3 128" in " ".join(stripe.build)
    assert stripe.manifest == {"kind": "dm-stripe", "chunk_kb": 64, "stripes": 3}
    crypt = parse_stack("dm-crypt")
    assert "crypt aes-xts-plain64" in crypt.build[0] and "dm-crypt" in crypt.modules
    loop = parse_stack("loop:dio=0,size=256M")
    assert "--direct-io=off" in " ".join(loop.build)
    assert loop.manifest["direct_io"] is False and loop.trace == ["$D0"]
    # the backing file's extent map before the workload (the model maps loop's sectors with
    # it) and after (direct writes convert unwritten extents); the file system's layout
    assert dict(loop.records)["loop_extents.txt"] == "filefrag -v /mnt/lower/loop.img"
    assert set(dict(loop.records)) == {"loop_extents.txt", "fs_layout.txt", "fs_journal.txt"}
    assert [f for f, _ in loop.records_after] == ["loop_extents_after.txt"]
    assert parse_stack("raid0:disks=2").records == []
    # no ext4lazyinit writes racing with the traced workload on the disk below
    assert "lazy_itable_init=0,lazy_journal_init=0" in loop.build[0]
    nb = parse_stack("null_blk:submit_queues=2")
    assert nb.disks == 0 and "submit_queues=2" in nb.build[0] and "queue_mode=2" in nb.build[0]
    sd = parse_stack("scsi-debug:dev_size_mb=256")
    assert sd.kind == "scsi_debug" and sd.top == "/dev/sda"


def test_dd_reads_and_writes() -> None:
    """dd without if/of reads the top device; with oflag it writes it from /dev/zero."""
    r = parse_workload("dd bs=4480k count=200 iflag=direct")
    assert r.commands == ("dd if=$TOP of=/dev/null bs=4480k count=200 iflag=direct",)
    assert r.shown("/dev/md0") == "dd if=/dev/md0 of=/dev/null bs=4480k count=200 iflag=direct"
    assert not r.writes
    w = parse_workload("dd bs=1M count=8 oflag=direct")
    assert w.commands[0].startswith("dd if=/dev/zero of=$TOP") and w.writes
    with pytest.raises(LabError, match="not key=value"):
        parse_workload("dd 1M")


def test_fio_options_get_a_target_and_direct_io(tmp_path: Path) -> None:
    """fio options: filename, name and direct=1 added when missing; a job file is shipped."""
    f = parse_workload("fio --rw=randread --bs=4k --iodepth=16 --ioengine=libaio")
    cmd = f.commands[0]
    assert "--filename=$TOP" in cmd and "--name=lab" in cmd and "--direct=1" in cmd
    assert "--output=$OUT/fio.json" in cmd and not f.writes
    job = tmp_path / "seed003.fio"
    job.write_text("[global]\nfilename=${TOP}\n[j]\nrw=randread\n")
    fj = parse_workload(f"fio {job}")
    assert fj.job_file == job and fj.commands[0].endswith("/share/jobs/seed003.fio")
    with pytest.raises(LabError, match="not found"):
        parse_workload("fio /nonexistent.fio")


def test_other_workloads() -> None:
    """blkdiscard, mkfs+fstrim, writeback, sh, on=fs; unknown kinds are refused."""
    assert parse_workload("blkdiscard -o 0 -l 256M").commands == (
        "blkdiscard -o 0 -l 256M $TOP",)
    trim = parse_workload("mkfs+fstrim ext4")
    assert trim.commands[0] == "mkfs.ext4 -q -F $TOP" and "fstrim -v /mnt/lab" in trim.commands
    wb = parse_workload("writeback 64M bs=1M")
    assert wb.commands == ("dd if=/dev/zero of=$TOP bs=1048576 count=64 status=none && sync",)
    fs = parse_workload("on=fs dd bs=1M count=64 oflag=direct")
    assert fs.on_fs and "of=$LAB_FILE" in fs.commands[0]
    with pytest.raises(LabError, match="unknown workload"):
        parse_workload("stress-ng --hdd 4")
    with pytest.raises(LabError, match="on=fs applies"):
        parse_workload("on=fs blkdiscard")


def test_settings_scopes() -> None:
    """top is the default scope; members/all/vdX are accepted; shell metacharacters are not."""
    assert parse_setting("max_sectors_kb=1024").text == "top:max_sectors_kb=1024"
    assert parse_setting("members:scheduler=mq-deadline").scope == "members"
    assert parse_setting("vdb:nr_requests=4").scope == "vdb"
    for bad in ("max_sectors_kb=1;reboot", "sda:nr_requests=4", "nr_requests"):
        with pytest.raises(LabError):
            parse_setting(bad)


def test_guest_script_is_valid_bash_and_logs_every_command() -> None:
    """The generated run.sh parses (bash -n) and carries each case's exact commands."""
    cases = [Case.make("r5", "raid5:disks=4,chunk=64k", "dd bs=1M count=10 iflag=direct",
                       ["max_sectors_kb=512", "members:scheduler=mq-deadline"]),
             Case.make("dm", "dm-linear:disks=2", "fio --rw=read --bs=1M --size=8M"),
             Case.make("fs", "raid0:disks=2", "on=fs dd bs=1M count=4 oflag=direct")]
    script = guest_script(cases, disks=4, rotational=0)
    proc = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert "cmd 'dd if=/dev/md0 of=/dev/null bs=1M count=10 iflag=direct'" in script
    assert "--raid-devices=4 --chunk=64 --layout=left-symmetric --bitmap=none " \
           "/dev/vda /dev/vdb /dev/vdc /dev/vdd" in script
    assert 'echo mq-deadline > /sys/block/$n/queue/scheduler' in script
    assert "echo 0 > /sys/block/vdd/queue/rotational" in script
    assert script.index("( run_case_r5 )") < script.index("( run_case_dm )")
    with pytest.raises(LabError, match="unique"):
        guest_script([cases[0], cases[0]])


def test_loop_records_run_outside_the_trace() -> None:
    """The extent map is taken after the stack is built and before blktrace starts; the map
    after the workload once blktrace has stopped (FIEMAP's own reads stay out of the trace)."""
    script = guest_script([Case.make("lp", "loop:dio=1", "dd bs=512k count=4 oflag=direct")],
                          disks=1)
    proc = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    before = '{ filefrag -v /mnt/lower/loop.img; } > "$OUT/loop_extents.txt" 2>&1'
    journal = """{ debugfs -R 'stat <8>' /dev/vda; } > "$OUT/fs_journal.txt" 2>&1"""
    after = "filefrag -v /mnt/lower/loop.img; } > \"$OUT/loop_extents_after.txt\" 2>&1"
    assert before in script and journal in script and after in script
    assert script.index("losetup --direct-io=on") < script.index(before) \
        < script.index("blktrace -b") < script.index("cmd 'dd if=/dev/zero of=/dev/loop0") \
        < script.index('kill -INT "$BT"') < script.index(after) < script.index("losetup -d")


def test_disk_spec_and_qemu_command(tmp_path: Path) -> None:
    """Per-disk properties reach virtio-blk-pci; TCG is multi-threaded with -cpu max."""
    spec = parse_disk_spec("size=2G,queues=1,depth=64,lbs=4096,rotational=0")
    assert spec == DiskSpec(size_mb=2048, rotational=0, queues=1, depth=64, lbs=4096)
    cmd = qemu_command(image=tmp_path / "bz", initrd=tmp_path / "i", disks=[tmp_path / "d0"],
                       disk=spec, share=tmp_path, accel="tcg")
    line = " ".join(cmd)
    assert "-accel tcg,thread=multi -cpu max" in line
    assert ("virtio-blk-pci,drive=d0,num-queues=1,queue-size=64,logical_block_size=4096,"
            "physical_block_size=4096") in line
    assert "rdinit=/init" in line and "mount_tag=share" in line
    for bad, msg in (("lbs=3000", "lbs"), ("depth=100", "depth"), ("colour=1", "unknown"),
                     ("size=1M", "at least")):
        with pytest.raises(LabError, match=msg):
            parse_disk_spec(bad)


def test_per_disk_overrides(tmp_path: Path) -> None:
    """--disk sets every disk; vdX:... (or N:...) changes one, starting from the default."""
    from workers.lab.qemu import make_disks, parse_disk_args

    default, over = parse_disk_args(["size=256M,queues=1", "vdb:lbs=4096,rotational=0",
                                     "2:size=512M"])
    assert default == DiskSpec(size_mb=256, queues=1)
    assert over[1] == DiskSpec(size_mb=256, queues=1, lbs=4096, rotational=0)
    assert over[2] == DiskSpec(size_mb=512, queues=1)
    paths = make_disks(tmp_path, 3, default, over)
    assert [p.stat().st_size >> 20 for p in paths] == [256, 256, 512]
    line = " ".join(qemu_command(image=tmp_path, initrd=tmp_path, disks=paths, disk=default,
                                 share=tmp_path, accel="tcg", overrides=over))
    assert "drive=d0,num-queues=1,queue-size=256,logical_block_size=512" in line
    assert "drive=d1,num-queues=1,queue-size=256,logical_block_size=4096" in line
    script = guest_script([Case.make("a", "raid0:disks=3", "dd bs=1M count=1")], disks=3,
                          rotational=None, rotational_per_disk={1: 0})
    assert "echo 0 > /sys/block/vdb/queue/rotational" in script
    assert "/sys/block/vda/queue/rotational" not in script
    with pytest.raises(LabError, match="vda..vdp"):
        parse_disk_args(["sdz:lbs=4096"])


def test_scheduler_is_set_before_nr_requests() -> None:
    """``nr_requests`` written before a scheduler switch would shrink the driver tags of a
    disk without a scheduler for the rest of the boot (``blk_mq_update_nr_requests``), and
    the switch resets it anyway: the guest applies ``scheduler`` first."""
    case = Case.make("nr4", "disk", "dd bs=4k count=8 iflag=direct",
                     ["nr_requests=4", "scheduler=mq-deadline", "max_sectors_kb=64"])
    assert [s.attr for s in ordered_settings(case.settings)] == \
        ["scheduler", "nr_requests", "max_sectors_kb"]
    script = guest_script([case], disks=1)
    assert script.index("echo mq-deadline > /sys/block/$n/queue/scheduler") < \
        script.index("echo 4 > /sys/block/$n/queue/nr_requests")


def test_defaults_are_restored_last_written_first(tmp_path: Path) -> None:
    """The guest's save_default / restore_defaults (run by bash over a fake sysfs): every
    attribute gets back the value it had before the case's first write, newest first, so
    ``nr_requests`` is restored while the case's scheduler is still active."""
    script = guest_script([Case.make("c", "disk", "dd bs=4k count=1 iflag=direct")])
    funcs = script[script.index("SYS_BLOCK="):script.index("dump_queue()")]
    queue = tmp_path / "sys" / "vda" / "queue"
    queue.mkdir(parents=True)
    (queue / "scheduler").write_text("[none] mq-deadline\n")
    (queue / "nr_requests").write_text("256\n")
    saved = tmp_path / "defaults"
    saved.mkdir()
    order = tmp_path / "order"
    body = funcs + f"""
cat() {{ echo "${{1##*/}}" >> {order}; command cat "$@"; }}
save_default vda scheduler; echo mq-deadline > $SYS_BLOCK/vda/queue/scheduler
save_default vda nr_requests; echo 4 > $SYS_BLOCK/vda/queue/nr_requests
save_default vda nr_requests; echo 8 > $SYS_BLOCK/vda/queue/nr_requests
restore_defaults
"""
    env = {"SYS_BLOCK": str(tmp_path / "sys"), "LAB_DEFAULTS": str(saved), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(["bash", "-c", body], text=True, capture_output=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert (queue / "scheduler").read_text().strip() == "none"
    assert (queue / "nr_requests").read_text().strip() == "256"  # the first value, not 4
    assert order.read_text().split() == ["001.vda.nr_requests", "000.vda.scheduler"]
    assert not list(saved.iterdir())


def test_md_stripe_cache_is_emptied_before_tracing(tmp_path: Path) -> None:
    """The guest shrinks md's stripe cache to its minimum and back before the trace starts
    (what udev's probe read stays out of the traced degraded reads), keeping the case's size."""
    script = guest_script([Case.make("deg", "raid5:disks=4,chunk=64k,degraded=1",
                                     "dd bs=1M count=4 iflag=direct",
                                     ["md_stripe_cache_size=4096"])], disks=4)
    line = next(x for x in script.splitlines() if "stripe_cache_size; if" in x)
    assert script.index(line) < script.index("blktrace -b")
    assert script.index("echo 4096 > /sys/block/md0/md/stripe_cache_size") < script.index(line)
    sc, log = tmp_path / "stripe_cache_size", tmp_path / "log"
    sc.write_text("4096\n")
    body = (f'echo() {{ builtin echo "$@" >> {log}; builtin echo "$@"; }}\n'
            + line.replace("/sys/block/md0/md/stripe_cache_size", str(sc)))
    proc = subprocess.run(["bash", "-c", body], text=True, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert log.read_text().split() == ["17", "4096"]
    assert sc.read_text().strip() == "4096"
