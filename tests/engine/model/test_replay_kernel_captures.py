"""The four real kernel captures (Debian 6.1.192 and 7.2.13): Q events in, D streams out."""

import lzma
import shutil
import tomllib
from pathlib import Path

import pytest
from model_helpers import d_stream, x_points

from workers.model import bios_from_table, preset_for_kernel, replay, stack_from_manifest
from workers.traces import parse_file

DATA = Path(__file__).resolve().parents[2] / "data" / "model"
CAPTURES = ["6.1_W1b", "6.1_W2a", "7.2_W1b", "7.2_W2a"]


def _load(name, tmp_path):
    text = tmp_path / f"{name}.blkparse.txt"
    with lzma.open(DATA / f"{name}.blkparse.txt.xz") as src, open(text, "wb") as dst:
        shutil.copyfileobj(src, dst)
    manifest = tomllib.loads((DATA / f"{name}.blkreview.toml").read_text())
    return parse_file(text), manifest


def _predict(name, tmp_path, engine="auto", device=None):
    real, manifest = _load(name, tmp_path)
    stack = stack_from_manifest(manifest, device=device)
    policy = preset_for_kernel(manifest["kernel"])
    pred = replay(bios_from_table(real, stack.top.dev), stack, policy, engine=engine)
    return real, pred, stack


@pytest.mark.parametrize("engine", ["python", "fast"])
@pytest.mark.parametrize("name", CAPTURES)
def test_capture_member_streams_split_points_and_cross_device_order(name, engine, tmp_path):
    """Fed the top device's Q events, the matching preset reproduces every D (sector, size,
    order per member), the X split points and the interleaving across devices exactly, with
    both engines."""
    real, pred, stack = _predict(name, tmp_path, engine)
    real_d, pred_d = d_stream(real), d_stream(pred)
    for node in stack.disks():
        assert d_stream(pred, node.dev) == d_stream(real, node.dev), node.name
    assert x_points(pred, stack.top.dev) == x_points(real, stack.top.dev)
    assert pred_d == real_d


@pytest.mark.parametrize("name", CAPTURES)
def test_capture_plug_events_match(name, tmp_path):
    """P (block_plug) events: the same sequence of devices as the capture, and each P in the
    same place relative to the D events (the flush that precedes it). The VM's virtio disks
    answer within about a millisecond, so they get a fast (NVMe-like) service model here: with
    the default HDD model of a rotational disk the queue would fill at the trace's submission
    times and D events would come later than the next Q."""
    import numpy as np

    from workers.events import ACT_ISSUE, ACT_PLUG

    real, pred, _ = _predict(name, tmp_path, device="nvme")

    def pd(t):
        rows = np.flatnonzero((t.action == ACT_PLUG) | (t.action == ACT_ISSUE))
        return [(int(t.action[i]), int(t.dev[i])) for i in rows]
    assert pd(pred) == pd(real)


def test_capture_6_1_raid5_cross_device_order_is_0_2048_3072_1024(tmp_path):
    """6.1 (split_remainder=tail) sends each 2M read's chunks in md0 order 0, 2048, 3072, 1024."""
    real, pred, stack = _predict("6.1_W1b", tmp_path)
    a_rows = (pred.action == 15)  # A: remap, aux = md0 sector
    first_read = [int(s) for s in pred.aux[a_rows][:4]]
    assert first_read == [0, 2048, 3072, 1024]
    assert [int(s) for s in real.aux[real.action == 15][:4]] == first_read


def test_capture_7_2_raid5_cross_device_order_is_ascending(tmp_path):
    """7.2 (split_remainder=head, md io_opt alignment) sends the chunks in ascending order."""
    _, pred, _ = _predict("7.2_W1b", tmp_path)
    md_sectors = [int(s) for s in pred.aux[pred.action == 15]]
    assert md_sectors == sorted(md_sectors)


def test_capture_6_1_order_differs_under_6_18_policy(tmp_path):
    """The 6.1 input under the 6.18 preset changes only the cross-device order."""
    real, manifest = _load("6.1_W1b", tmp_path)
    stack = stack_from_manifest(manifest)
    pred = replay(bios_from_table(real, stack.top.dev), stack, preset_for_kernel("6.18"))
    assert d_stream(pred) != d_stream(real)
    for node in stack.disks():
        assert d_stream(pred, node.dev) == d_stream(real, node.dev)


def test_bios_from_table_plug_rules_and_flushes():
    """Plugs come from the G/D state, else from the workload's bs, else one per bio; bare
    flushes (0 sectors, REQ_PREFLUSH) are kept as empty rows (the replay sends them down as
    empty flushes); a device without Q events is a typed error."""
    from workers.errors import ModelConfigError
    from workers.events import ACT_QUEUE, RWBS_FLUSH, RWBS_READ, RWBS_WRITE, EventTable, make_dev

    dev = make_dev(8, 0)
    t = EventTable.from_columns(time_ns=[0, 1, 2, 3], dev=[dev] * 4, pid=[7] * 4,
                                action=[ACT_QUEUE] * 4, sector=[0, 1024, 0, 2048],
                                nr_sectors=[1024, 1024, 0, 1024],
                                rwbs=[RWBS_READ, RWBS_READ, RWBS_FLUSH | RWBS_WRITE, RWBS_READ])
    per_bio = bios_from_table(t, dev)
    assert per_bio.sector.tolist() == [0, 1024, 0, 2048]
    assert per_bio.nr_sectors.tolist() == [1024, 1024, 0, 1024]
    assert per_bio.plug.tolist() == [0, 1, 2, 3]
    by_bs = bios_from_table(t, dev, workload="dd if=/dev/sda of=/dev/null bs=1M iflag=direct")
    assert by_bs.plug.tolist() == [0, 0, 1, 1]
    with pytest.raises(ModelConfigError):
        bios_from_table(t, make_dev(8, 16))


def test_bios_from_table_insert_ends_a_plug_unplug_does_not():
    """G keeps a plug open until D or I; a U alone (7.2 traces the flush-on-add as U, after
    the G of the request that stays plugged) does not end it."""
    from workers.events import (
        ACT_GETRQ,
        ACT_INSERT,
        ACT_QUEUE,
        ACT_UNPLUG_IO,
        EventTable,
        make_dev,
    )

    dev = make_dev(8, 0)
    acts = [ACT_QUEUE, ACT_GETRQ, ACT_QUEUE, ACT_GETRQ, ACT_UNPLUG_IO, ACT_QUEUE, ACT_GETRQ,
            ACT_INSERT, ACT_INSERT, ACT_INSERT, ACT_QUEUE, ACT_GETRQ]
    secs = [0, 0, 8, 8, 0, 16, 16, 0, 8, 16, 24, 24]
    t = EventTable.from_columns(time_ns=list(range(12)), dev=[dev] * 12, pid=[5] * 12,
                                action=acts, sector=secs, nr_sectors=[8] * 12, rwbs=[1] * 12)
    # D events exist elsewhere in real traces; add one unrelated D so the G/D rule applies
    t = EventTable.concat([t, EventTable.from_columns(time_ns=[12], dev=[make_dev(8, 16)],
                                                      pid=[5], action=[7], sector=[0],
                                                      nr_sectors=[8], rwbs=[1])])
    assert bios_from_table(t, dev).plug.tolist() == [0, 0, 0, 1]


@pytest.mark.parametrize("name", CAPTURES)
def test_capture_blkparse_text_matches_line_by_line(name, tmp_path):
    """The prediction written in blkparse's layout equals the capture line by line in device,
    action, RWBS, sector and size for every Q, X, A, G, P, M and D (times, C and the
    version-dependent U lines left out), with a fast service model for the VM's disks."""
    import io

    from workers.traces.writers import write_blkparse

    real, pred, _ = _predict(name, tmp_path, device="nvme")

    def lines(text):
        out = []
        for ln in text.splitlines():
            p = ln.split()
            if len(p) > 7 and "," in p[0] and p[5] not in ("C", "U"):
                out.append(tuple(p[:1] + p[5:10]))
        return out

    buf = io.StringIO()
    write_blkparse(pred, buf)
    text = (tmp_path / f"{name}.blkparse.txt").read_text()
    assert lines(buf.getvalue()) == lines(text)
    assert len(lines(text)) >= 2200


@pytest.mark.parametrize("name", CAPTURES)
def test_capture_unplug_events_match_with_depth(name, tmp_path):
    """U (block_unplug) lines with their depth: 7.2 traces every plug flush, the direct
    single-queue path included (unplug_trace=always), 6.1 none of its direct issues
    (not_direct); with the U lines kept, the blkparse text still equals the capture line by
    line for every Q, X, A, G, P, M, U and D."""
    import io

    from workers.traces.writers import write_blkparse

    real, pred, _ = _predict(name, tmp_path, device="nvme")

    def lines(text):
        out = []
        for ln in text.splitlines():
            p = ln.split()
            if len(p) > 7 and "," in p[0] and p[5] != "C":
                out.append(tuple(p[:1] + p[5:10]))
        return out

    buf = io.StringIO()
    write_blkparse(pred, buf)
    want = lines((tmp_path / f"{name}.blkparse.txt").read_text())
    got = lines(buf.getvalue())
    n_unplug = sum(1 for ln in want if ln[1] == "U")
    assert n_unplug == (0 if name.startswith("6.1") else {"7.2_W1b": 400, "7.2_W2a": 600}[name])
    assert got == want


@pytest.mark.parametrize("name", ["6.1_W1b", "7.2_W1b"])
@pytest.mark.parametrize("engine", ["python", "fast"])
def test_capture_split_events_carry_the_front_size_as_the_binary_trace_does(name, engine,
                                                                           tmp_path):
    """md0's X records in the raw blktrace hold the split (front) bio's sector and size
    (blk_add_trace_split) and the remainder's start; the prediction's X rows hold the same, so
    `--emit blktrace` reads back through blkparse as `X R`, not `X N`."""
    from workers.events import ACT_SPLIT, make_dev
    from workers.traces import ingest

    raw = ingest([DATA / f"{name}.md0.blktrace.0", DATA / f"{name}.md0.blktrace.1"]).table
    md0 = make_dev(9, 0)

    def splits(t):
        rows = (t.action == ACT_SPLIT) & (t.dev == md0)
        return list(zip(t.sector[rows].tolist(), t.nr_sectors[rows].tolist(),
                        t.aux[rows].tolist()))

    _, pred, _ = _predict(name, tmp_path, engine)
    real = splits(raw)
    assert real and all(n > 0 for _, n, _ in real)
    assert splits(pred) == real


def test_bios_from_table_front_merged_dispatch_ends_a_plug_with_many_outstanding():
    """A D whose start is no request's G (a front merge) releases the requests it covers,
    however many are outstanding on other threads (the lookup had a silent cap of 256)."""
    from workers.events import ACT_GETRQ, ACT_ISSUE, ACT_QUEUE, EventTable, make_dev

    dev = make_dev(8, 0)
    others = 300
    acts = [ACT_QUEUE, ACT_GETRQ]
    secs = [8, 8]
    pids = [1, 1]
    for i in range(others):  # 300 requests of other threads stay outstanding
        acts += [ACT_QUEUE, ACT_GETRQ]
        secs += [100_000 + 8 * i] * 2
        pids += [10 + i] * 2
    acts += [ACT_ISSUE, ACT_QUEUE]  # thread 1's request went out front-merged at sector 0
    secs += [0, 5000]
    pids += [1, 1]
    nr = [8] * len(acts)
    nr[-2] = 16
    n = len(acts)
    t = EventTable.from_columns(time_ns=list(range(n)), dev=[dev] * n, pid=pids, action=acts,
                                sector=secs, nr_sectors=nr, rwbs=[1] * n)
    plug = bios_from_table(t, dev).plug.tolist()
    assert plug[-1] != plug[0], "thread 1's next bio must start a new plug"


def _raid0_table(with_plug: bool, every: bool = False):
    """Two 1M reads on a 2-disk raid0 (64k chunks) as a blktrace capture records them: Q on
    md0, then G/D of each 64k chunk on its member, with P before the first G when plugged."""
    from workers.events import ACT_GETRQ, ACT_ISSUE, ACT_PLUG, ACT_QUEUE, EventTable, make_dev

    md, a, b = make_dev(9, 0), make_dev(254, 0), make_dev(254, 16)
    rows = []
    t = 0
    for k in range(2):
        rows.append((t, md, ACT_QUEUE, k * 2048, 2048))
        t += 1
        for c in range(16):
            dev = a if c % 2 == 0 else b
            sec = 4096 + (k * 8 + c // 2) * 128
            if with_plug and (c < 2 or every):
                rows.append((t, dev, ACT_PLUG, 0, 0))
                t += 1
            rows.append((t, dev, ACT_GETRQ, sec, 128))
            rows.append((t + 1, dev, ACT_ISSUE, sec, 128))
            t += 2
    tt, dev, act, sec, nr = (list(x) for x in zip(*rows))
    table = EventTable.from_columns(time_ns=tt, dev=dev, pid=[7] * len(tt), action=act,
                                    sector=sec, nr_sectors=nr, rwbs=[1] * len(tt))
    table.meta["format"] = "blktrace"
    return table, md


def test_bios_without_a_plug_event_are_replayed_unplugged():
    """__blkdev_direct_IO_simple (dd bs<=1M) submits without a task plug: no P in the trace,
    so each bio is its own unplugged unit and its member requests never merge in a plug."""
    from workers.events import ACT_ISSUE

    table, md = _raid0_table(with_plug=False)
    bios = bios_from_table(table, md)
    assert (bios.plug < 0).all()
    stack = stack_from_manifest({"kernel": "6.1", "stack": {
        "top": "9,0", "kind": "raid0", "chunk_kb": 64, "members": ["254,0", "254,16"],
        "data_offset_sectors": 4096}})
    pred = replay(bios, stack, preset_for_kernel("6.1"))
    d = pred.action == ACT_ISSUE
    assert set(pred.nr_sectors[d].tolist()) == {128}
    plugged, _ = _raid0_table(with_plug=True)
    bios_p = bios_from_table(plugged, md)
    assert (bios_p.plug >= 0).all()
    merged = replay(bios_p, stack, preset_for_kernel("6.1"))
    assert max(merged.nr_sectors[merged.action == ACT_ISSUE].tolist()) > 128


def test_a_plug_per_request_is_replayed_like_no_plug():
    """__submit_bio's own plug (when the task holds none) wraps each bio it takes from the bio
    list, so a trace with one P (and its U) for every G had no plug two requests shared: the
    replay keeps the chunk pieces apart, as for a submission without P (6.18's dd on raid0)."""
    from workers.events import ACT_ISSUE

    table, md = _raid0_table(with_plug=True, every=True)
    bios = bios_from_table(table, md)
    assert (bios.plug < 0).all()
    stack = stack_from_manifest({"kernel": "6.18", "stack": {
        "top": "9,0", "kind": "raid0", "chunk_kb": 64, "members": ["254,0", "254,16"],
        "data_offset_sectors": 4096}})
    pred = replay(bios, stack, preset_for_kernel("6.18"))
    assert set(pred.nr_sectors[pred.action == ACT_ISSUE].tolist()) == {128}
