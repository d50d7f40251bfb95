"""Seed 001 (Ed Tsai: 1028K direct-I/O bios fragment at a 512K max_sectors; Ming Lei's align)."""

import numpy as np
from model_helpers import d_stream, x_points

from workers.events import ACT_QUEUE, make_dev
from workers.model import (
    BioStream,
    bios_from_workload,
    preset_for_kernel,
    replay,
    stack_from_spec,
)

DISK = "disk:max_sectors_kb=512,device=ufs"


def test_seed001_1028k_bios_issue_512k_512k_4k():
    """Bios of 1028KB (one page join) on a 512KB disk are issued 512K, 512K, 4K each."""
    stack = stack_from_spec(DISK)
    table = replay(bios_from_workload("dd:bs=1028k,count=20,joins=1"), stack,
                   preset_for_kernel("6.1"))
    sizes = [n for _, _, n in d_stream(table)]
    assert sizes == [1024, 1024, 8] * 20


def _fragments(policy_spec):
    stack = stack_from_spec(DISK)
    policy = preset_for_kernel("6.1").with_overrides(policy_spec)
    # Ed's 64 MB dd: bios of 2120 sectors (9 page joins), two reads
    table = replay(bios_from_workload("dd:bs=64m,count=2,joins=9"), stack, policy)
    d = d_stream(table)
    per_read = 64 * 2048
    small_inside = [(s, n) for _, s, n in d if n < 1024 and (s + n) % per_read != 0]
    q = table.nr_sectors[(table.action == ACT_QUEUE) & (table.dev == stack.top.dev)]
    qs = table.sector[(table.action == ACT_QUEUE) & (table.dev == stack.top.dev)]
    return small_inside, q.astype(int).tolist(), qs.astype(int).tolist()


def test_seed001_cap_max_sectors_leaves_no_inner_fragments():
    """Uncapped bios leave sub-512K fragments inside the request; bio_build=cap_max_sectors
    leaves none except at the end of each request."""
    frag_uncapped, _, _ = _fragments("bio_build=uncapped")
    frag_capped, _, _ = _fragments("bio_build=cap_max_sectors")
    assert len(frag_uncapped) > 50
    assert frag_capped == []


def test_seed001_align_256k_bios_are_multiples():
    """bio_build=align:262144: every bio but the last of a request is a multiple of 256K."""
    _, sizes, starts = _fragments("bio_build=align:262144")
    per_read = 64 * 2048
    for s, n in zip(starts, sizes):
        if (s + n) % per_read != 0:
            assert n % 512 == 0, (s, n)


FTRACE_BIOS = [(86925864, 2144), (86928008, 2144), (86930152, 2112), (86932264, 2096)]
QUOTED_SPLITS = [(86925864, 86926888), (86926888, 86927912), (86928008, 86929032),
                 (86929032, 86930056), (86930152, 86931176), (86931176, 86932200),
                 (86932264, 86933288), (86933288, 86934312)]
QUOTED_ISSUE = [(86925864, 1024), (86926888, 1024), (86928008, 1024), (86927912, 96),
                (86929032, 1024), (86930152, 1024), (86930056, 96), (86931176, 1024),
                (86932264, 1024), (86932200, 64), (86933288, 1024)]


def _ftrace_replay(kernel):
    stack = stack_from_spec(DISK.replace("disk:", "disk:") + ",scheduler=none")
    sec = [s for s, _ in FTRACE_BIOS]
    nr = [n for _, n in FTRACE_BIOS]
    bios = BioStream.from_arrays(sec, nr, plug=[0, 0, 0, 0], top_dev=make_dev(8, 0))
    return replay(bios, stack, preset_for_kernel(kernel)), stack


def test_seed001_ftrace_6_1_reproduces_splits_and_issue_order():
    """The quoted block_bio_queue events, one plug, max_sectors 1024, 6.1 preset: the quoted
    block_split points and block_rq_issue order, tails issued after the next bio's first
    piece (LIFO plug list of 5.16-6.12)."""
    table, stack = _ftrace_replay("6.1")
    assert x_points(table, stack.top.dev) == QUOTED_SPLITS
    issued = [(s, n) for _, s, n in d_stream(table)]
    assert issued[:len(QUOTED_ISSUE)] == QUOTED_ISSUE
    assert issued[len(QUOTED_ISSUE):] == [(86934312, 48)]


def test_seed001_ftrace_6_18_issues_ascending():
    """The same input under the 6.18 preset (FIFO plug) is issued in ascending order."""
    table, _ = _ftrace_replay("6.18")
    issued = [s for _, s, _ in d_stream(table)]
    assert issued == sorted(issued)
    assert len(issued) == 12
    assert np.all(np.diff(issued) > 0)


def test_seed001_quoted_ftrace_file_end_to_end():
    """The quoted ftrace lines (tests/data/model, copied from the seed) parsed by
    workers.traces, their block_bio_queue events replayed as one plug (one large direct read:
    the workload rule) under 6.1: the predicted X and D events equal the quoted ones."""
    from pathlib import Path

    from workers.model import bios_from_table
    from workers.traces import parse_file

    path = Path(__file__).resolve().parents[2] / "data" / "model" / "seed001_ed_tsai_ftrace.txt"
    quoted = parse_file(path)
    dev = int(quoted.dev[0])
    bios = bios_from_table(quoted, dev, workload="dd if=/dev/sdc of=/dev/null bs=64M "
                                                 "iflag=direct")
    assert bios.plug.tolist() == [0, 0, 0, 0]
    stack = stack_from_spec(DISK + ",scheduler=none")
    table = replay(bios, stack, preset_for_kernel("6.1"))
    assert x_points(table, stack.top.dev) == x_points(quoted, dev)
    predicted = [(s, n) for _, s, n in d_stream(table)]
    real = [(s, n) for _, s, n in d_stream(quoted)]
    assert predicted[:len(real)] == real
