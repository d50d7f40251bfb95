"""dm-crypt's own request size limit (``crypt_map`` -> ``dm_accept_partial_bio``).

Since 0d815e3400e6 "dm-crypt: limit the size of encryption requests" (v6.11)
``get_max_request_sectors`` caps reads and writes at DM_CRYPT_DEFAULT_MAX_READ_SIZE /
DM_CRYPT_DEFAULT_MAX_WRITE_SIZE (128 KiB) and dm resubmits the rest
(``dm_split_and_process_bio``): a 256 KiB direct read reaches the device as 128 KiB + 128 KiB
(the 7.3.4 capture dmcrypt_dd256k: 0+256, 256+256, ...). Before it only a write above
BIO_MAX_VECS pages (1 MiB) was cut; reads went down whole.
"""

from __future__ import annotations

import numpy as np
import pytest
from model_helpers import d_stream

from workers.events import ACT_REMAP, ACT_SPLIT, RWBS_DISCARD, RWBS_READ, RWBS_WRITE
from workers.model import BioStream, preset_for_kernel, replay, stack_from_spec

#: a dm-crypt over one disk whose own limits never cut a 2 MiB bio
SPEC = "dm-crypt:disks=1,max_sectors_kb=4096,max_segments=1024"


def _sizes(kernel: str, rwbs: int, nr: int) -> list[int]:
    """The pieces dm-crypt remapped (A) onto its device: reads go down as cut (dd's direct
    I/O holds no plug, ``__blkdev_direct_IO_simple``); the write thread may merge the pieces
    of a write it finds together (test_dm_crypt_write_thread.py), so writes are counted
    at A."""
    stack = stack_from_spec(SPEC)
    assert stack.top.approximates == "dm-crypt"
    table = replay(BioStream.from_arrays([0], [nr], rwbs=rwbs, plug=[-1]), stack,
                   preset_for_kernel(kernel), engine="python")
    member = stack.top.members[0].dev
    a = np.flatnonzero((table.action == ACT_REMAP) & (table.dev == member))
    out = [int(table.nr_sectors[i]) for i in a]
    if rwbs == RWBS_READ:
        assert out == [n for _, _, n in d_stream(table, member)]
    return out


@pytest.mark.parametrize("rwbs", [RWBS_READ, RWBS_WRITE])
def test_6_11_cuts_reads_and_writes_at_128k(rwbs):
    assert _sizes("7.3.4", rwbs, 512) == [256, 256]
    assert _sizes("6.11.0", rwbs, 600) == [256, 256, 88]


def test_before_6_11_only_writes_above_1m_are_cut():
    assert _sizes("6.1.0-57-amd64", RWBS_READ, 4096) == [4096]
    assert _sizes("6.10.14", RWBS_WRITE, 4096) == [2048, 2048]
    assert _sizes("6.10.14", RWBS_WRITE, 512) == [512]


def test_md_linear_is_not_cut():
    stack = stack_from_spec("linear:disks=1,max_sectors_kb=4096,max_segments=1024")
    table = replay(BioStream.from_arrays([0], [512], plug=[-1]), stack,
                   preset_for_kernel("7.3.4"), engine="python")
    assert [n for _, _, n in d_stream(table, stack.top.members[0].dev)] == [512]


def test_dm_does_not_cut_reads_to_its_own_limits():
    """6.1's dm-crypt advertises max_segment_size = PAGE_SIZE (254 segments: 1016 KiB), yet
    ``dm_split_and_process_bio`` calls ``bio_split_to_limits`` only for abnormal I/O: a 1 MiB
    read of a contiguous buffer reaches the member whole (the 6.1.0-57 capture dmcrypt_dd1M:
    0+2048, 2048+2048, ... on the member, no X on dm-0); a discard is cut to dm's limits."""
    stack = stack_from_spec("dm-crypt:disks=1,max_segments=254,md_max_segments=254,"
                            "md_max_segment_size=4096,md_max_discard_sectors=1024")
    member = stack.top.members[0].dev
    table = replay(BioStream.from_arrays([0, 2048], [2048, 2048], rwbs=RWBS_READ,
                                         plug=[-1, -2]),
                   stack, preset_for_kernel("6.1.0-57-amd64"), engine="python")
    assert [(s, n) for _, s, n in d_stream(table, member)] == [(0, 2048), (2048, 2048)]
    assert not bool(np.any(table.action == ACT_SPLIT))
    trim = replay(BioStream.from_arrays([0], [2048], rwbs=RWBS_DISCARD, plug=[-1]), stack,
                  preset_for_kernel("6.1.0-57-amd64"), engine="python")
    assert int(np.sum((trim.action == ACT_SPLIT) & (trim.dev == stack.top.dev))) == 1
