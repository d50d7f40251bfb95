"""End to end: boot a real Debian kernel under qemu, capture a small md workload, ingest it.

Runs in CI (``make test``). The kernel (bookworm's newest 6.1 from the configured Debian
archive), the guest root and the module cpio are cached outside the checkout
(``$BLKREVIEW_LAB_CACHE`` or ``~/.cache/blkreview-lab``), so a second run only boots: about a
minute under TCG on 2 cores. A fresh machine first builds the guest root with mmdebstrap (1-4
minutes) and downloads the kernel (70 MB). ``BLKREVIEW_LAB_TESTS=0`` skips it on a machine
that cannot run qemu (the CI machine can: scripts/setup.sh installs it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from workers.events import ACT_ISSUE, ACT_QUEUE, RWBS_READ
from workers.traces import ingest

ROOT = Path(__file__).resolve().parents[3]

pytestmark = [
    pytest.mark.lab, pytest.mark.slow, pytest.mark.timeout(1800),
    pytest.mark.skipif(os.environ.get("BLKREVIEW_LAB_TESTS") == "0",
                       reason="BLKREVIEW_LAB_TESTS=0"),
]


def test_boot_debian_61_raid0_dd_and_ingest(tmp_path: Path) -> None:
    """raid0 over 3 virtio disks, 64k chunk, 8 direct 256k reads: md0 sees 8 Q of 512
    sectors, the members' D events cover exactly those sectors, and no D crosses a chunk."""
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "workers", "lab", "--kernel", "6.1",
           "--stack", "raid0:disks=3,chunk=64k", "--disk", "size=256M",
           "--workload", "dd bs=256k count=8 iflag=direct", "--out", str(out), "--json"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1700,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "booting under" in proc.stderr and "case raid0_dd_1 done rc=0" in proc.stderr
    res = json.loads(proc.stdout)
    run = res["runs"][0]
    assert run["kernel"].startswith("6.1.0-") and run["accel"] in ("kvm", "tcg")
    case = run["cases"][0]
    assert case["ok"], case
    bundle = Path(case["bundle"])
    assert bundle.name == "raid0_dd_1.tar.zst"

    result = ingest([bundle])
    t, man = result.table, result.manifest
    assert man is not None and man.kernel == run["kernel"]
    assert man.stack["kind"] == "raid0" and man.stack["chunk_kb"] == 64
    md0 = 9 << 20
    members = [int(a) << 20 | int(b) for a, b in (m.split(",") for m in man.stack["members"])]
    assert len(members) == 3 and set(t.device_ids()) == {md0, *members}
    q = (t.dev == md0) & (t.action == ACT_QUEUE)
    assert q.sum() == 8 and set(t.nr_sectors[q].tolist()) == {512}
    off = int(man.stack["data_offset_sectors"])
    d = np.isin(t.dev, members) & (t.action == ACT_ISSUE) & ((t.rwbs & RWBS_READ) != 0)
    assert int(t.nr_sectors[d].sum()) == 8 * 512
    rel = t.sector[d].astype(np.int64) - off
    assert (rel // 128 == (rel + t.nr_sectors[d] - 1) // 128).all()
    assert "dd if=/dev/md0 of=/dev/null bs=256k count=8 iflag=direct" in (
        out / run["kernel"] / "raid0_dd_1" / "commands.txt").read_text()
