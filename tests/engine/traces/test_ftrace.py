"""ftrace block tracepoints -> EventTable."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workers.errors import ParseError
from workers.events import (
    ACT_BACKMERGE,
    ACT_COMPLETE,
    ACT_FRONTMERGE,
    ACT_GETRQ,
    ACT_INSERT,
    ACT_ISSUE,
    ACT_PLUG,
    ACT_QUEUE,
    ACT_REMAP,
    ACT_REQUEUE,
    ACT_SPLIT,
    ACT_UNPLUG_IO,
    ACTION_CODES,
    RWBS_AHEAD,
    RWBS_ATOMIC,
    RWBS_FLUSH,
    RWBS_FUA,
    RWBS_READ,
    RWBS_SYNC,
    RWBS_WRITE,
    RWBS_WRITE_ZEROES,
    EventTable,
    dev_str,
    make_dev,
    rwbs_to_text,
)
from workers.traces import detect_format, parse_file
from workers.traces.ftrace import ftrace_rwbs, parse_ftrace

SEED001_LINES = """\
block_bio_queue: 8,32 R 86925864 + 2144 [Thread-51]
block_split: 8,32 R 86925864 / 86926888 [Thread-51]
block_split: 8,32 R 86926888 / 86927912 [Thread-51]
block_rq_issue: 8,32 R 524288 () 86925864 + 1024 [Thread-51]
block_rq_issue: 8,32 R 524288 () 86926888 + 1024 [Thread-51]
block_bio_queue: 8,32 R 86928008 + 2144 [Thread-51]
block_split: 8,32 R 86928008 / 86929032 [Thread-51]
block_split: 8,32 R 86929032 / 86930056 [Thread-51]
block_rq_issue: 8,32 R 524288 () 86928008 + 1024 [Thread-51]
block_rq_issue: 8,32 R 49152 () 86927912 + 96 [Thread-51]
block_rq_issue: 8,32 R 524288 () 86929032 + 1024 [Thread-51]
"""


def test_seed001_bare_lines(tmp_path: Path) -> None:
    """Seed 001's bare ftrace lines: order kept, time unknown, sizes and split points exact."""
    p = tmp_path / "mail.txt"
    p.write_text("As observed in the Antutu test:\n\n" + SEED001_LINES + "\nThanks\n")
    assert detect_format(p) == "ftrace"
    t = parse_ftrace(p)
    assert not t.time_known
    assert t.time_ns.tolist() == list(range(11))
    assert t.action.tolist() == [ACT_QUEUE, ACT_SPLIT, ACT_SPLIT, ACT_ISSUE, ACT_ISSUE,
                                 ACT_QUEUE, ACT_SPLIT, ACT_SPLIT, ACT_ISSUE, ACT_ISSUE,
                                 ACT_ISSUE]
    assert set(t.dev.tolist()) == {make_dev(8, 32)}
    assert t.nr_sectors[0] == 2144
    assert t.aux[1] == 86926888 and t.aux[2] == 86927912
    issues = t.action == ACT_ISSUE
    # the 48 KiB (96-sector) fragment sandwiched between 512 KiB requests
    assert t.nr_sectors[issues].tolist() == [1024, 1024, 1024, 96, 1024]
    assert t.sector[issues].tolist()[3] == 86927912
    assert {t.comm_of(i) for i in range(len(t))} == {"Thread-51"}


def test_seed001_quoted_lines(tmp_path: Path) -> None:
    """The same lines quoted twice in a reply (``> > ``) parse identically."""
    p = tmp_path / "reply.txt"
    p.write_text("".join("> > " + ln + "\n" for ln in SEED001_LINES.splitlines()))
    t = parse_ftrace(p)
    assert len(t) == 11 and t.sector[-1] == 86929032


def test_linux618_capture(data_dir: Path) -> None:
    """The real 6.18 capture: ioprio layout, 5-char flags, io_start/io_done skipped."""
    t = parse_file(data_dir / "ftrace_linux6.18.txt")
    counts = t.action_counts()
    assert counts["Q"] == 190 and counts["D"] == 166 and counts["C"] == 133
    assert counts["R"] == 43 and counts["X"] == 43 and counts["U"] == 138
    assert t.time_known
    assert t.time_ns[0] == 0
    assert t.meta["time_offset_ns"] == 470_846_132_000
    assert t.meta["skipped_events"] == {"block_io_done": 133, "block_io_start": 176}
    d0 = int(np.flatnonzero(t.action == ACT_ISSUE)[0])
    assert (t.sector[d0], t.nr_sectors[d0], t.pid[d0], t.cpu[d0]) == (29947736, 128, 18069, 1)
    assert t.rwbs[d0] == RWBS_READ | RWBS_AHEAD
    req = int(np.flatnonzero(t.action == ACT_REQUEUE)[0])
    assert (t.sector[req], t.nr_sectors[req]) == (52150272, 2056)
    c0 = int(np.flatnonzero(t.action == ACT_COMPLETE)[0])
    assert t.comm_of(c0) == "ksoftirqd/1"  # completions carry the prefix task
    u0 = int(np.flatnonzero(t.action == ACT_UNPLUG_IO)[0])
    assert t.aux[u0] == 1 and t.dev[u0] == make_dev(254, 0)


def test_old_kernel_layout_and_prefix_variants(tmp_path: Path) -> None:
    """3.x 'R 0 ()' rq bodies, 4-char flags, TGID column, perf script prefix, task with
    spaces and dashes, remap and bio_complete bodies."""
    text = (
        "           cksum-12994 [000] d... 7269913.317924: block_rq_issue: 202,1 R 0 () "
        "9357056 + 72 [cksum]\n"
        "  Web Content-x-77 (   70) [003] .... 10.000001: block_rq_complete: 8,0 W () 8 + 8 "
        "[0]\n"
        "  fio 4242 [002] 11.500000: block:block_bio_queue: 8,0 WFS 16 + 8 [fio]\n"
        "  fio-4242 [002] ..... 11.600000: block_bio_remap: 8,0 W 4096 + 8 <- (8,1) 2048\n"
        "  fio-4242 [002] ..... 11.700000: block_bio_complete: 8,0 W 4096 + 8 [-5]\n"
        "  fio-4242 [002] ..... 11.800000: nvme_setup_cmd: whatever\n"
    )
    p = tmp_path / "old.txt"
    p.write_text(text)
    t = parse_ftrace(p)
    assert len(t) == 5
    assert t.nr_sectors[0] == 72 and t.dev[0] == make_dev(202, 1)
    assert t.pid[1] == 77 and t.cpu[1] == 3
    assert t.pid[2] == 4242 and t.rwbs[2] == RWBS_WRITE | RWBS_FUA | RWBS_SYNC
    assert t.action[3] == ACT_REMAP and t.aux[3] == 2048 and t.aux2[3] == make_dev(8, 1)
    assert t.error[4] == -5
    # relative to the earliest timestamp (line 2), in ns from the seconds.microseconds field
    assert t.time_ns[1] == 0 and t.time_ns[2] == 1_499_999_000
    assert t.meta["time_offset_ns"] == 10_000_001_000
    assert t.meta["skipped_events"] == {"nvme_setup_cmd": 1}


@pytest.mark.parametrize(("text", "bits"), [
    ("R", RWBS_READ),
    ("FWFS", RWBS_FLUSH | RWBS_WRITE | RWBS_FUA | RWBS_SYNC),
    ("WFSU", RWBS_WRITE | RWBS_FUA | RWBS_SYNC | RWBS_ATOMIC),
    ("WZ", RWBS_WRITE_ZEROES),
    ("RA", RWBS_READ | RWBS_AHEAD),
])
def test_ftrace_rwbs(text: str, bits: int) -> None:
    """Kernel blk_fill_rwbs spellings, including 2025 letters, map to bits."""
    assert ftrace_rwbs(text) == bits


def test_malformed_known_event_is_parse_error(tmp_path: Path) -> None:
    """A block_rq_issue with a mangled body is a ParseError with its line number."""
    p = tmp_path / "bad.txt"
    lines = SEED001_LINES.splitlines()[:2] + ["block_rq_issue: 8,32 R 524288 () 86925864 + [t]"]
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(ParseError) as ei:
        parse_ftrace(p, name="bad.txt")
    assert ei.value.line == 3
    assert "block_rq_issue" in ei.value.reason and "no known layout" in ei.value.reason


@pytest.mark.parametrize(("line", "reason"), [
    ("dd-1 [000] ..... 1.000: block_rq_issue: 99999,0 R 4096 () 8 + 8 be,0,4 [dd]", "device"),
    ("dd-1 [000] ..... 1.000: block_rq_issue: 8,0 R 4096 () 8 + 8 be,0,4 [dd]\n"
     "dd-1 [000] ..... 1.000: block_bio_remap: 8,0 R 8 + 8 <- (4096,1) 8", "device"),
    ("dd-1 [000] ..... 99999999999.000: block_rq_issue: 8,0 R 4096 () 8 + 8 [dd]",
     "out of range"),
])
def test_ftrace_numbers_out_of_range(tmp_path: Path, line: str, reason: str) -> None:
    """A dev_t or time that fits no column is a ParseError with the line, not an OverflowError."""
    p = tmp_path / "t.txt"
    p.write_text(line + "\n")
    with pytest.raises(ParseError) as ei:
        parse_ftrace(p, name="t.txt")
    assert ei.value.line == line.count("\n") + 1 and reason in ei.value.reason


def test_issue_action_codes_are_blktrace_letters() -> None:
    """block_rq_issue is blktrace's D, block_bio_queue its Q."""
    assert ACTION_CODES["D"] == ACT_ISSUE and ACTION_CODES["Q"] == ACT_QUEUE


def _rows(t: EventTable) -> list[tuple[str, str, int, int, str, str, int, int]]:
    """(action letter, dev, sector, size, rwbs text, comm, pid, cpu) per row."""
    letters = {v: k for k, v in ACTION_CODES.items()}
    return [(letters[int(t.action[i])], dev_str(int(t.dev[i])), int(t.sector[i]),
             int(t.nr_sectors[i]), rwbs_to_text(int(t.rwbs[i])),
             t.comm_of(i), int(t.pid[i]), int(t.cpu[i])) for i in range(len(t))]


def test_linux618_each_event_kind(data_dir: Path) -> None:
    """getrq, plug, unplug, rq_insert, back/frontmerge and bio_remap in the 6.18 layout parse to
    the right action, dev, sector, size, rwbs and comm (the 6.18 capture has no frontmerge and no
    remap: those two lines were written by hand in the same layout)."""
    t = parse_ftrace(data_dir / "ftrace_events_linux6.18.txt")
    assert t.meta["skipped_events"] == {"block_io_start": 1}
    assert _rows(t) == [
        ("Q", "254,0", 29947736, 128, "RA", "dd", 18069, 1),
        ("G", "254,0", 29947736, 128, "RA", "dd", 18069, 1),
        ("P", "254,0", 0, 0, "N", "dd", 18069, 1),
        ("U", "254,0", 0, 0, "N", "dd", 18069, 1),
        ("I", "254,0", 29947736, 128, "RA", "dd", 18069, 1),
        ("D", "254,0", 29947736, 128, "RA", "dd", 18069, 1),
        ("M", "254,0", 74083184, 16, "WS", "kworker/u8:0", 12, 1),
        ("M", "254,0", 74083200, 8, "WS", "kworker/u8:0", 12, 1),
        ("F", "254,0", 74083168, 16, "WS", "kworker/u8:0", 12, 1),
        ("A", "252,0", 74085224, 8, "WS", "jbd2/vda1-8", 211, 0),
    ]
    actions = t.action.tolist()
    assert actions[2] == ACT_PLUG and actions[3] == ACT_UNPLUG_IO
    assert actions[1] == ACT_GETRQ and actions[4] == ACT_INSERT
    assert actions[6] == ACT_BACKMERGE and actions[8] == ACT_FRONTMERGE
    assert t.aux[3] == 1  # unplug depth
    assert (t.aux[9], dev_str(int(t.aux2[9]))) == (74083176, "254,1")  # remapped from
    assert t.rwbs[6] == RWBS_WRITE | RWBS_SYNC
    # 470.846132 s is time 0; the remap is 49.158 ms later
    assert t.time_ns[0] == 0 and t.time_ns[9] == 49_158_000


def test_tpoint_example_rq_insert_and_issue(data_dir: Path) -> None:
    """perf-tools' tpoint example: 4-char flags, 3.x 'R 0 ()' bodies, stack-trace lines skipped;
    the block_rq_insert lines parse to I with dev 202,1, sector, size, comm and pid."""
    t = parse_file(data_dir / "tpoint_example.txt")
    assert t.action_counts() == {"D": 16, "I": 2}
    ins = np.flatnonzero(t.action == ACT_INSERT)
    got = [(dev_str(int(t.dev[i])), int(t.sector[i]), int(t.nr_sectors[i]),
            rwbs_to_text(int(t.rwbs[i])), t.comm_of(int(i)), int(t.pid[i]),
            int(t.cpu[i])) for i in ins]
    assert got == [("202,1", 736304, 256, "R", "cksum", 11908, 0),
                   ("202,1", 736560, 136, "R", "cksum", 11908, 0)]
    first_d = int(np.flatnonzero(t.action == ACT_ISSUE)[0])
    assert t.rwbs[first_d] == RWBS_WRITE and t.comm_of(first_d) == "supervise"


def test_first_plug_takes_the_tasks_next_device(tmp_path: Path) -> None:
    """block_plug names no device: a task's plug before its first bio belongs to the device of
    that bio (not a phantom 0,0, nor another task's device); a task that never names a device
    gets the last device seen."""
    p = tmp_path / "plug.txt"
    p.write_text(
        "  kworker-5 [001] ..... 0.999999: block_bio_queue: 8,0 W 64 + 8 [kworker]\n"
        "  dd-7 [000] ..... 1.000000: block_plug: [dd]\n"
        "  dd-7 [000] ..... 1.000001: block_bio_queue: 8,16 R 8 + 8 [dd]\n"
        "  dd-7 [000] ..... 1.000002: block_unplug: [dd] 1\n"
        "  kworker-5 [001] ..... 1.000003: block_plug: [kworker]\n"
        "  cat-9 [001] ..... 1.000004: block_plug: [cat]\n")
    t = parse_ftrace(p)
    assert [dev_str(int(d)) for d in t.dev] == ["8,0", "8,16", "8,16", "8,16", "8,0", "8,16"]
    assert t.device_ids() == [make_dev(8, 0), make_dev(8, 16)]
    assert t.action.tolist()[1:4] == [ACT_PLUG, ACT_QUEUE, ACT_UNPLUG_IO]
