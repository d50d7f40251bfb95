"""The machine side without booting: the cpio writer, the boot watcher, accelerator choice."""

from __future__ import annotations

import lzma
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workers.lab import qemu
from workers.lab.host import LabError
from workers.lab.initramfs import Cpio, _decompress, _module_sources, init_cpio


def test_cpio_is_read_by_gnu_cpio(tmp_path: Path) -> None:
    """Our newc writer's archive lists and extracts with cpio(1): files, modes, symlinks."""
    if not shutil.which("cpio"):
        pytest.fail("cpio is not installed (scripts/setup.sh installs it)")
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "a.ko").write_bytes(b"\x7fELF" + bytes(range(256)) * 3)
    (tree / "link").symlink_to("sub/a.ko")
    c = Cpio()
    c.dir("usr")
    c.tree(tree, "usr/x")
    c.file("init", b"#!/bin/sh\necho hi\n", mode=0o755)
    blob = c.finish()
    assert len(blob) % 512 == 0
    out = tmp_path / "out"
    out.mkdir()
    subprocess.run(["cpio", "-idm", "--quiet"], input=blob, cwd=out, check=True)
    assert (out / "usr/x/sub/a.ko").read_bytes() == (tree / "sub" / "a.ko").read_bytes()
    assert (out / "usr/x/link").is_symlink()
    assert (out / "init").stat().st_mode & 0o777 == 0o755


def test_init_loads_the_boot_modules_and_runs_the_share_script() -> None:
    """/init mounts the 9p share, runs run.sh and powers off."""
    blob = init_cpio(["raid456"])
    text = blob.decode("latin-1")
    assert "bash /share/run.sh" in text and "busybox poweroff -f" in text
    assert "virtio_blk 9pnet_virtio 9p" in text and "raid456" in text


def test_module_subset_and_decompression(tmp_path: Path) -> None:
    """Listed directories and single modules are picked; .ko.xz is unpacked on the host."""
    mods = tmp_path / "6.9.0"
    (mods / "kernel/drivers/md").mkdir(parents=True)
    (mods / "kernel/drivers/gpu").mkdir(parents=True)
    (mods / "kernel/drivers/scsi").mkdir(parents=True)
    (mods / "kernel/drivers/md/raid456.ko.xz").write_bytes(lzma.compress(b"module"))
    (mods / "kernel/drivers/gpu/big.ko.xz").write_bytes(b"x")
    (mods / "kernel/drivers/scsi/scsi_debug.ko").write_bytes(b"y")
    (mods / "kernel/drivers/scsi/other.ko").write_bytes(b"z")
    picked = {p.name for p in _module_sources(mods, ("drivers/md",
                                                     "drivers/scsi/scsi_debug.ko"))}
    assert picked == {"raid456.ko.xz", "scsi_debug.ko"}
    assert _decompress(mods / "kernel/drivers/md/raid456.ko.xz") == ("raid456.ko", b"module")


def _fake_qemu(script: str) -> list[str]:
    """A stand-in guest: a real process printing console lines (the watcher reads its pipe)."""
    return [sys.executable, "-c", script, "-accel", "tcg"]


def test_boot_passes_progress_and_finishes(tmp_path: Path) -> None:
    """@@lab lines reach the progress callback; the console goes to the log."""
    seen: list[str] = []
    res = qemu.boot(_fake_qemu(
        "print('Linux version 6.1'); print('@@lab init 6.1 cpus=2'); "
        "print('@@lab case a done rc=0'); print('@@lab all done')"),
        log=tmp_path / "console.log", progress=seen.append, boot_timeout=30, timeout=60)
    assert seen == ["init 6.1 cpus=2", "case a done rc=0", "all done"]
    assert res.accel == "tcg" and res.exit_code == 0
    assert "Linux version 6.1" in (tmp_path / "console.log").read_text()


def test_boot_timeout_quotes_the_console(tmp_path: Path) -> None:
    """A guest that never reaches /init is killed; the error quotes its last lines."""
    with pytest.raises(qemu.BootTimeout, match="Probing EDD"):
        qemu.boot(_fake_qemu("import time; print('Probing EDD', flush=True); time.sleep(60)"),
                  log=tmp_path / "c.log", progress=lambda _t: None, boot_timeout=2,
                  timeout=10)


def test_guest_that_stops_early_is_an_error(tmp_path: Path) -> None:
    """No 'all done': the run is reported as unfinished, with the console tail."""
    with pytest.raises(LabError, match="(?s)before finishing.*Kernel panic"):
        qemu.boot(_fake_qemu("print('@@lab init x'); print('Kernel panic - not syncing')"),
                  log=tmp_path / "c.log", progress=lambda _t: None, boot_timeout=30,
                  timeout=30)
    with pytest.raises(qemu.GuestStopped) as stopped:
        qemu.boot(_fake_qemu("print('@@lab init x'); print('@@lab case a done rc=0'); "
                             "print('@@lab case b stack dm-stripe'); print('@@lab exit 1')"),
                  log=tmp_path / "c.log", progress=lambda _t: None, boot_timeout=30,
                  timeout=30)
    # what the guest finished is kept: the runner still bundles case a
    assert "case a done rc=0" in stopped.value.result.markers
    with pytest.raises(LabError, match="cannot mount the 9p share"):
        qemu.boot(_fake_qemu("print('@@lab init x'); "
                             "print('@@lab fatal: cannot mount the 9p share')"),
                  log=tmp_path / "c.log", progress=lambda _t: None, boot_timeout=30,
                  timeout=30)


def test_accelerator_choice(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No KVM and no TCG is a clear error; a KVM that hung before is not tried again."""
    monkeypatch.setenv("BLKREVIEW_LAB_CACHE", str(tmp_path))
    monkeypatch.setattr(qemu, "need_tool", lambda *a: "/usr/bin/true")
    monkeypatch.setattr(qemu, "accel_support", lambda: (False, False))
    with pytest.raises(LabError, match="no KVM .* and no TCG"):
        qemu.choose_accel("auto")
    monkeypatch.setattr(qemu, "accel_support", lambda: (True, True))
    assert qemu.choose_accel("auto") == ["kvm", "tcg"]
    qemu.kvm_known(False)
    assert qemu.choose_accel("auto") == ["tcg"]
    monkeypatch.setattr(qemu, "accel_support", lambda: (False, True))
    with pytest.raises(LabError, match="/dev/kvm cannot be opened"):
        qemu.choose_accel("kvm")


def test_a_panic_before_init_ends_the_boot_at_once(tmp_path: Path) -> None:
    """"Kernel panic - not syncing" before /init: BootPanic quoting the panic, well before the
    boot timeout (6.18.15 under TCG: an int3 oops while the kernel patched its own text)."""
    t0 = time.monotonic()
    with pytest.raises(qemu.BootPanic, match="(?s)panicked while booting.*Fatal exception"):
        qemu.boot(_fake_qemu(
            "import time; print('Oops: int3', flush=True); "
            "print('Kernel panic - not syncing: Fatal exception in interrupt', flush=True); "
            "time.sleep(60)"),
            log=tmp_path / "c.log", progress=lambda _t: None, boot_timeout=30, timeout=60)
    assert time.monotonic() - t0 < 15


def test_run_kernel_boots_again_once_after_a_panic_before_init(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first boot panics before /init, the second runs: the case is collected from the
    second, the first console is kept; two panics in a row fail the run."""
    from workers.lab import runner
    from workers.lab.kernels import Kernel
    from workers.lab.script import Case

    monkeypatch.setenv("BLKREVIEW_LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("BLKREVIEW_LAB_VM_LOCK", str(tmp_path / "vm.lock"))  # not the real VMs
    monkeypatch.setattr(runner, "guest_root", lambda progress=None: tmp_path)
    monkeypatch.setattr(runner, "build_initramfs", lambda root, kernel, out: out)
    monkeypatch.setattr(runner, "make_disks", lambda *a, **k: [])
    monkeypatch.setattr(runner, "choose_accel", lambda accel: ["tcg"])
    monkeypatch.setattr(runner, "qemu_command", lambda **k: ["qemu"])
    calls: list[int] = []

    def fake_boot(cmd: list[str], *, log: Path, **_k: object) -> qemu.BootResult:
        calls.append(1)
        log.write_text(f"boot {len(calls)}\n")
        if len(calls) == 1 or panics_twice:
            raise qemu.BootPanic("the guest kernel panicked while booting (tcg)")
        return qemu.BootResult("tcg", 1.0, 0.5, 0, ["init x", "all done"])

    monkeypatch.setattr(runner, "boot", fake_boot)
    kernel = Kernel("6.18.15+deb13-amd64", tmp_path / "vmlinuz", None, "test")
    case = Case.make("a", "disk", "dd bs=1M count=1 iflag=direct")
    panics_twice = False
    res = runner.run_kernel(kernel, [case], tmp_path / "out")
    assert len(calls) == 2 and [c.name for c in res.cases] == ["a"]
    kdir = tmp_path / "out" / kernel.version
    assert (kdir / "console.panic.log").read_text() == "boot 1\n"
    assert (kdir / "console.log").read_text() == "boot 2\n"
    panics_twice, calls[:] = True, []
    with pytest.raises(qemu.BootPanic):
        runner.run_kernel(kernel, [case], tmp_path / "out2")
    assert len(calls) == 2
