"""``__submit_bio``'s own plug around each bio of the bio list, read from the trace.

When the task holds no plug (dd's direct I/O, ``__blkdev_direct_IO_simple``), ``__submit_bio``
wraps every bio it takes from the bio list in a plug of its own and finishes it before the
next: a stacked device's pieces then show P, G, U, D each, and never merge with each other.
A task plug whose requests are BLK_PLUG_FLUSH_SIZE (128 KiB) or bigger also shows a P per G
(``blk_add_rq_to_plug`` flushes the big request), but that flush comes when the *next* request
is added, after its G, and the next bio may have merged first. So a unit of big requests is
"a plug per bio" only when every request's U comes before the next request's G (the 6.12.117
dm-crypt capture dmcrypt_dd256k: 128 KiB pieces, P G U D each; before this, the replay merged
the two pieces of every read back into one 256 KiB request and scored 0%).
"""

from __future__ import annotations

import numpy as np
from model_helpers import thread_table

from workers.events import (
    ACT_GETRQ,
    ACT_ISSUE,
    ACT_PLUG,
    ACT_QUEUE,
    ACT_UNPLUG_IO,
    make_dev,
)
from workers.model.trace_plugs import mark_unplugged

TOP, DISK = make_dev(252, 0), make_dev(254, 0)



def _unit_ids(rows):
    table = thread_table(rows)
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == TOP))
    return mark_unplugged(table, q, np.zeros(len(q), dtype=np.int64)).tolist()


def test_a_plug_finished_before_each_next_getrq_is_a_plug_per_bio():
    rows = [(0, TOP, ACT_QUEUE, 0, 512),
            (1, DISK, ACT_QUEUE, 0, 256), (2, DISK, ACT_GETRQ, 0, 256),
            (3, DISK, ACT_PLUG, 0, 0), (4, DISK, ACT_UNPLUG_IO, 0, 0),
            (5, DISK, ACT_ISSUE, 0, 256),
            (6, DISK, ACT_QUEUE, 256, 256), (7, DISK, ACT_GETRQ, 256, 256),
            (8, DISK, ACT_PLUG, 0, 0), (9, DISK, ACT_UNPLUG_IO, 0, 0),
            (10, DISK, ACT_ISSUE, 256, 256)]
    assert _unit_ids(rows) == [-1]


def test_a_big_request_flushed_only_after_the_next_getrq_is_one_task_plug():
    rows = [(0, TOP, ACT_QUEUE, 0, 512),
            (1, DISK, ACT_QUEUE, 0, 256), (2, DISK, ACT_GETRQ, 0, 256),
            (3, DISK, ACT_PLUG, 0, 0),
            (6, DISK, ACT_QUEUE, 1000, 256), (7, DISK, ACT_GETRQ, 1000, 256),
            (8, DISK, ACT_UNPLUG_IO, 0, 0), (9, DISK, ACT_ISSUE, 0, 256),
            (10, DISK, ACT_PLUG, 0, 0), (11, DISK, ACT_UNPLUG_IO, 0, 0),
            (12, DISK, ACT_ISSUE, 1000, 256)]
    assert _unit_ids(rows) == [0]
