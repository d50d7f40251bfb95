"""The chunked merge of part files into a column store gives exactly the single-task ingest:
column by column, comms, devices, meta, warnings, file reports and the stored table bytes, on
multi-file traces with ties in time across files (issue 12: merging worker < 2 GB)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from workers.analyzers import analyze
from workers.events import COLUMNS
from workers.traces import ingest
from workers.traces.shards import PartFile, bundle_manifest, parse_shard, write_part
from workers.traces.streammerge import NotMergeable, ingest_stored
from workers.traces.synth import realistic_table
from workers.traces.writers import encode_blktrace

DEMO = Path(__file__).resolve().parents[3] / "reviewapp" / "demo"


def _per_cpu_trace(out: Path, *, events: int = 60_000, cpus: int = 4, tick: int = 20_000,
                   seed: int = 2) -> list[Path]:
    """Per-CPU binary files of one realistic table whose times are rounded to ``tick`` ns:
    many events of different files share a time (the ties a stable merge must keep in file
    order), and one file is empty (an idle CPU)."""
    t = realistic_table(events, seed=seed, cpus=cpus)
    t.time_ns = (t.time_ns // tick) * tick + 10_000_000
    paths = []
    for c in range(cpus + 1):
        p = out / f"sdx.blktrace.{c}"
        rows = np.flatnonzero(t.cpu == c)
        p.write_bytes(encode_blktrace(t.take(rows), process_notes=c == 1) if len(rows) else b"")
        paths.append(p)
    return paths


def _parts(paths: list[Path], names: list[str], tmp: Path) -> tuple[dict, dict, bool]:
    manifest, strict, shardable = bundle_manifest(paths, names)
    parsed, files = {}, {}
    for i in shardable:
        part = parse_shard(paths[i], names[i], manifest=manifest, strict=strict)
        f = tmp / f"{i}.part"
        with open(f, "wb") as fh:
            write_part(part, fh)
        parsed[names[i]] = part
        files[names[i]] = PartFile(f)
    return parsed, files, strict


def _same(paths: list[Path], tmp: Path, rows: int) -> None:
    names = [p.name for p in paths]
    parsed, files, strict = _parts(paths, names, tmp)
    single = ingest(paths, names=names, strict=strict, parsed=parsed)
    stored = ingest_stored(paths, names=names, strict=strict, parts=files, out=tmp / "store",
                           rows=rows)
    assert stored is not None
    a, store = single.table, stored.store
    b = store.to_table()
    assert len(a) == len(store) > 0
    for name, _ in COLUMNS:
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.comms == b.comms and a.meta == b.meta and a.time_known == b.time_known
    assert {k: v.to_json() for k, v in a.devices.items()} == {
        k: v.to_json() for k, v in b.devices.items()}
    assert single.warnings == stored.warnings
    assert [r.to_json() for r in single.files] == [r.to_json() for r in stored.files]
    assert single.summaries == stored.summaries
    x, y = io.BytesIO(), io.BytesIO()
    a.save(x)
    store.save_npz(y, rows=rows * 13 + 1)  # several chunks per column
    assert x.getvalue() == y.getvalue()
    ra = json.dumps(analyze(a, summaries=single.summaries), sort_keys=True, default=str)
    rb = json.dumps(analyze(b, summaries=stored.summaries), sort_keys=True, default=str)
    assert ra == rb


@pytest.mark.parametrize("rows", [64, 1000, 10_000_000])
def test_chunked_merge_equals_ingest_with_ties_across_files(tmp_path, rows):
    paths = _per_cpu_trace(tmp_path)
    # the trace really has ties across files (else the test could not fail on their order)
    times = np.concatenate([np.unique(ingest([p], names=[p.name]).table.time_ns
                                      + ingest([p], names=[p.name]).table.meta["genesis_ns"])
                            for p in paths if p.stat().st_size])
    assert len(times) > len(np.unique(times))
    _same(paths, tmp_path, rows)


def test_chunked_merge_equals_ingest_on_a_demo_capture_with_manifest(tmp_path):
    """18 per-CPU files of md0 and its members plus blkreview.toml: device names from the
    file names and the manifest, PROCESS notes in several files."""
    paths = sorted((DEMO / "k61_W1b").iterdir())
    _same(paths, tmp_path, 50)


def test_a_part_out_of_time_order_is_refused(tmp_path):
    t = realistic_table(3000, seed=4, cpus=1)
    t.time_ns = t.time_ns[::-1].copy()  # a "per-CPU" file running backwards
    p = tmp_path / "sdx.blktrace.0"
    q = tmp_path / "sdx.blktrace.1"
    p.write_bytes(encode_blktrace(t))
    q.write_bytes(encode_blktrace(realistic_table(100, seed=5, cpus=1)))
    names = [p.name, q.name]
    _, files, strict = _parts([p, q], names, tmp_path)
    with pytest.raises(NotMergeable):
        ingest_stored([p, q], names=names, strict=strict, parts=files, out=tmp_path / "s",
                      rows=100)


def test_bundles_it_does_not_merge_are_left_to_ingest(tmp_path):
    """A text trace (sorted with the binary table on (time, dev, cpu, seq)) or a file without
    a part: None, the caller runs ingest."""
    paths = _per_cpu_trace(tmp_path, events=5000)
    text = DEMO / "seed000_before.blkparse.txt"
    names = [p.name for p in paths]
    _, files, strict = _parts(paths, names, tmp_path)
    assert ingest_stored([*paths, text], names=[*names, text.name], strict=strict,
                         parts={**files, text.name: PartFile(_write(text, tmp_path))},
                         out=tmp_path / "a") is None
    files.pop(names[0])
    assert ingest_stored(paths, names=names, strict=strict, parts=files,
                         out=tmp_path / "b") is None


def _write(path: Path, tmp: Path) -> Path:
    out = tmp / (path.name + ".part")
    with open(out, "wb") as fh:
        write_part(parse_shard(path, path.name, manifest=None), fh)
    return out
