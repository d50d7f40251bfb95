"""One lab VM at a time: a second process waits for the first's lock and says whom it waits for."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workers.lab.vmlock import lock_path, one_vm_at_a_time

WAITER = """
import sys, time
from workers.lab.vmlock import one_vm_at_a_time
t0 = time.monotonic()
with one_vm_at_a_time(lambda msg: print(msg, flush=True)):
    print(f"got it after {time.monotonic() - t0:.2f}", flush=True)
"""


def _waiter(env_lock: Path) -> subprocess.Popen[str]:
    root = Path(__file__).resolve().parents[3]
    return subprocess.Popen([sys.executable, "-c", WAITER], cwd=root, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={"BLKREVIEW_LAB_VM_LOCK": str(env_lock), "PATH": "/usr/bin:/bin"})


def test_second_process_waits_for_the_first(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    lock = tmp_path / "vm.lock"
    monkeypatch.setenv("BLKREVIEW_LAB_VM_LOCK", str(lock))
    assert lock_path() == lock
    said: list[str] = []
    with one_vm_at_a_time(said.append):
        proc = _waiter(lock)
        time.sleep(1.5)
        assert proc.poll() is None  # still waiting while we hold the lock
    out, _ = proc.communicate(timeout=30)
    assert said == []  # the first one did not wait
    lines = out.splitlines()
    assert lines[0].startswith("waiting for another lab VM to finish")
    assert f"pid {os.getpid()}" in lines[0]
    assert lines[1].startswith("got it after")
    assert float(lines[1].split()[-1]) >= 1.0
    assert lock.read_text() == ""  # released and emptied


def test_free_lock_is_taken_at_once(tmp_path: Path) -> None:
    proc = _waiter(tmp_path / "vm.lock")
    out, _ = proc.communicate(timeout=30)
    assert out.splitlines()[0].startswith("got it after")
