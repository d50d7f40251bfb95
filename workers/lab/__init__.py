"""The trace lab: real Debian (or locally built) kernels booted under qemu, blktrace captures.

One boot per kernel runs a list of *cases* (a stack built on virtio disks, queue settings, a
workload) and writes one bundle per case: the blktrace of the top device and of every member,
queue limits, md/dm parameters, the exact commands, ``uname -r`` and a ``blkreview.toml``
manifest, packed as ``.tar.zst`` that the ingester (:mod:`workers.traces`) reads as is.

Modules, one concept each:

* :mod:`workers.lab.host`: the cache directory, host commands and tools, :class:`LabError`;
* :mod:`workers.lab.kernels`: Debian kernel packages through a private apt configuration, or a
  local ``bzImage`` + modules directory;
* :mod:`workers.lab.guestroot`: the guest root (mmdebstrap, built once) as an uncompressed cpio;
* :mod:`workers.lab.initramfs`: the per-kernel module cpio and the ``/init`` that runs the cases;
* :mod:`workers.lab.qemu`: disks, the qemu command line, accelerator choice, boot with progress;
* :mod:`workers.lab.stacks`: ``raid5:disks=8,chunk=64k`` -> the guest commands that build it;
* :mod:`workers.lab.workloads`: ``dd bs=4480k count=200 iflag=direct`` -> guest commands;
* :mod:`workers.lab.script`: the guest shell script of one boot (every case, tracing, sysfs dumps);
* :mod:`workers.lab.bundle`: a case's output directory -> manifest + ``.tar.zst``;
* :mod:`workers.lab.runner`: one kernel, many cases: fetch, build, boot, bundle;
* :mod:`workers.lab.upload`: baseline + patched bundles posted as one comparison (REST API);
* :mod:`workers.lab.matrix`: the fidelity matrix (kernels x cases) read from its data file.

Nothing here imports Django or Celery; everything runs on the host as root or as a user
(mmdebstrap's root mode needs root; see docs/lab.md).
"""
