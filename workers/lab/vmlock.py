"""One lab VM at a time on a machine: an exclusive ``flock`` held while qemu runs.

Two guests under TCG share the host's cores, and a capture's timing (which request raid5d or the
flusher finds queued, what the plug holds when it is flushed) then reflects the other guest's
load, not the kernel. A matrix run, a second ``lab`` command and the lab's own boot test
therefore take turns: whoever comes second says so and waits. The lock is a file in the
system's temporary directory (``$BLKREVIEW_LAB_VM_LOCK`` overrides), not in the kernel cache, so
that runs with different caches still take turns; the kernel drops it when the process ends,
however it ends.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def lock_path() -> Path:
    """``$BLKREVIEW_LAB_VM_LOCK``, else ``blkreview-lab-vm.lock`` in the temporary directory."""
    env = os.environ.get("BLKREVIEW_LAB_VM_LOCK")
    return Path(env) if env else Path(tempfile.gettempdir()) / "blkreview-lab-vm.lock"


@contextmanager
def one_vm_at_a_time(progress: Callable[[str], None]) -> Iterator[None]:
    """Hold the machine's VM lock for the body; if another lab process holds it, tell
    ``progress`` who (its pid, written in the file) and wait for it."""
    path = lock_path()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            progress(f"waiting for another lab VM to finish (pid {holder}, lock {path})")
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
