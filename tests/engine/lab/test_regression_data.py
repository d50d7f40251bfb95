"""The lab's regression captures (tests/data/lab/matrix): real kernels, checked against facts
that hold on every kernel, whatever the model says.

The subset is split as the matrix is: ``calibration/`` (may inform model parameters) and
``evaluation/`` (held out). See tests/data/lab/README.md.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from workers.events import (
    ACT_ISSUE,
    ACT_QUEUE,
    ACT_REMAP,
    RWBS_DISCARD,
    RWBS_READ,
    RWBS_WRITE,
    parse_dev,
)
from workers.lab.stacks import parse_size
from workers.traces import ingest
from workers.traces.directory import directory_files

DATA = Path(__file__).resolve().parents[2] / "data" / "lab" / "matrix"
INDEX = json.loads((DATA / "index.json").read_text())["cells"] if (
    DATA / "index.json").exists() else {}
CELLS = sorted(INDEX.items())


def test_the_subset_has_both_splits_and_several_kernels() -> None:
    """Calibration and held-out evaluation captures, from at least 3 kernels, a few MB."""
    assert {c["split"] for c in INDEX.values()} == {"calibration", "evaluation"}
    assert len({c["kernel"] for c in INDEX.values()}) >= 3
    total = sum(p.stat().st_size for p in DATA.rglob("*") if p.is_file())
    assert total < 8 << 20
    for cell in INDEX.values():
        assert cell["bundle"].startswith(f"{cell['split']}/{cell['kernel']}/")


def _dd_total_sectors(spec: str) -> int | None:
    words = dict(w.split("=", 1) for w in spec.split()[1:] if "=" in w)
    if "bs" not in words or "count" not in words:
        return None
    return parse_size(words["bs"]) * int(words["count"]) // 512


@pytest.mark.parametrize("key,cell", CELLS, ids=[k for k, _ in CELLS])
def test_capture_ingests_and_keeps_block_layer_invariants(key: str, cell: dict[str, Any]
                                                          ) -> None:
    """Manifest = cell; traced devices = top + members; dd moves bs*count through the top
    device; md reads (no redundancy read, not degraded) reach members sector for sector."""
    res = ingest(directory_files(DATA / cell["bundle"], []))
    man, t = res.manifest, res.table
    assert man is not None and man.kernel == cell["kernel"]
    assert man.workload["spec"] == cell["workload"]
    top = parse_dev(man.stack["top"])
    members = [parse_dev(m) for m in man.stack.get("members", [])]
    # remap (A) rows carry the device remapped *to*: a partition's parent disk
    own = set(np.unique(t.dev[t.action != ACT_REMAP]).tolist())
    assert own <= {top, *members} and top in own
    q = (t.dev == top) & (t.action == ACT_QUEUE)
    spec = cell["workload"]
    reading = spec.startswith("dd") and "oflag" not in spec
    if spec.startswith("dd") and not cell["stack"].startswith(("partition", "loop")):
        want = (int(man.workload["bytes"]) // 512 if "bytes" in man.workload
                else _dd_total_sectors(spec))
        direction = RWBS_READ if reading else RWBS_WRITE
        got = int(t.nr_sectors[q & ((t.rwbs & direction) != 0)].sum())
        assert got == want, f"{key}: top Q sectors {got} != dd's {want}"
    kind = man.stack["kind"]
    if reading and kind in ("raid0", "raid5", "raid6", "raid10", "linear") and \
            not man.stack.get("degraded"):
        d = np.isin(t.dev, members) & (t.action == ACT_ISSUE) & ((t.rwbs & RWBS_READ) != 0)
        assert int(t.nr_sectors[d].sum()) == int(t.nr_sectors[q].sum()), key
    if "discard" in cell["family"] and "blkdiscard" in spec:
        d = np.isin(t.dev, members) & (t.action == ACT_ISSUE) & \
            ((t.rwbs & RWBS_DISCARD) != 0)
        length = re.search(r"-l\s+(\S+)", spec)
        assert length is not None
        assert int(t.nr_sectors[d].sum()) == parse_size(length.group(1)) // 512
