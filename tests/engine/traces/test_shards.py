"""Parsing a bundle's files as separate shards (each through storage bytes) and merging them
gives exactly the EventTable and the analyzers' results of the single-pass ingest."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from workers.analyzers import analyze
from workers.events import COLUMNS
from workers.traces import ingest
from workers.traces.shards import bundle_manifest, parse_shard, part_from_bytes, part_to_bytes

DEMO = Path(__file__).resolve().parents[3] / "reviewapp" / "demo"


@pytest.mark.parametrize("capture", ["k61_W1b", "k72_W1b"])
def test_sharded_ingest_equals_single_pass_on_per_cpu_blktrace(capture, monkeypatch):
    """18 per-CPU binary files of md0 + 8 members (and the manifest): identical table,
    identical results JSON; the merge parses none of the shards' files again."""
    import workers.traces as traces

    paths = sorted((DEMO / capture).iterdir())
    single = ingest(paths, names=[p.name for p in paths])
    names = [p.name for p in paths]
    manifest, strict, shardable = bundle_manifest(paths, names)
    parsed = {names[i]: part_from_bytes(part_to_bytes(
        parse_shard(paths[i], names[i], manifest=manifest, strict=strict))) for i in shardable}
    calls = []
    real = traces.parse_part
    monkeypatch.setattr(traces, "parse_part", lambda *a, **k: calls.append(a) or real(*a, **k))
    sharded = ingest(paths, names=names, parsed=parsed)
    assert calls == []  # every trace file came from its shard
    shards = len(parsed)
    assert shards == 18
    a, b = single.table, sharded.table
    assert len(a) == len(b) > 0
    for name, _ in COLUMNS:
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.comms == b.comms and a.meta == b.meta
    assert {k: v.to_json() for k, v in a.devices.items()} == {
        k: v.to_json() for k, v in b.devices.items()}
    assert single.warnings == sharded.warnings
    assert [r.to_json() for r in single.files] == [r.to_json() for r in sharded.files]
    ra = json.dumps(analyze(a, summaries=single.summaries), sort_keys=True, default=str)
    rb = json.dumps(analyze(b, summaries=sharded.summaries), sort_keys=True, default=str)
    assert ra == rb


def test_part_round_trip_of_a_text_trace():
    """A blkparse text part survives the bytes round trip unchanged."""
    path = DEMO / "seed000_before.blkparse.txt"
    part = parse_shard(path, path.name, manifest=None)
    back = part_from_bytes(part_to_bytes(part))
    assert (back.name, back.fmt, back.binary, back.warnings) == (
        part.name, part.fmt, part.binary, part.warnings)
    for name, _ in COLUMNS:
        assert np.array_equal(getattr(back.table, name), getattr(part.table, name)), name
    with pytest.raises(ValueError, match="not a parsed shard"):
        part_from_bytes(b"garbage-bytes-here")
