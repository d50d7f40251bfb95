"""Damaged blktrace records are reported as corruption (offset, bytes skipped), never blamed
on the capture's relay buffer; strict mode refuses the file instead (issue 10 item 14)."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workers.errors import ParseError
from workers.events import ACT_QUEUE, RWBS_READ, EventTable, make_dev
from workers.traces import ingest
from workers.traces.blktrace_bin import (
    MAX_PDU,
    MAX_REGIONS,
    _walk,
    parse_blktrace_bytes,
    walk_records_py,
)
from workers.traces.synth import all_actions_table
from workers.traces.writers import encode_blktrace

PDU_LEN_AT = 46  # offset of pdu_len in a v1 record header


def _records(n: int) -> bytes:
    """n Q records (48 bytes each, no payload) on 8,0 cpu 0 with seq 1..n."""
    table = EventTable({"time_ns": [1000 * (i + 1) for i in range(n)],
                        "seq": list(range(1, n + 1)), "dev": [make_dev(8, 0)] * n,
                        "cpu": [0] * n, "pid": [7] * n, "action": [ACT_QUEUE] * n,
                        "rwbs": [RWBS_READ] * n, "sector": [8 * i for i in range(n)],
                        "nr_sectors": [8] * n})
    return encode_blktrace(table, process_notes=False)


def _corrupt_pdu_len(n: int = 1000, record: int = 10, pdu: int = 48 * 683) -> bytes:
    """The issue's case: one record's pdu_len says ~32 KB, and 32 KB later a record happens to
    start, so following the length lands on a valid header 683 records on."""
    data = bytearray(_records(n))
    struct.pack_into("<H", data, 48 * record + PDU_LEN_AT, pdu)
    return bytes(data)


def test_corrupted_pdu_len_is_reported_as_corruption(tmp_path: Path) -> None:
    """A 32 KB pdu_len is a damaged record at its offset with the bytes skipped, not a
    sequence gap of the relay buffer; only that one record is lost."""
    p = tmp_path / "sda.blktrace.0"
    p.write_bytes(_corrupt_pdu_len())
    result = ingest([p], names=["sda.blktrace.0"])
    assert len(result.table) == 999
    kinds = [d["kind"] for d in result.table.meta["diagnostics"]]
    assert kinds == ["corrupt_record"]
    diag = result.table.meta["diagnostics"][0]
    assert diag["offset"] == 480 and diag["skipped_bytes"] == 48
    assert "payload length 32784" in diag["reason"]
    assert "next valid record at byte 528" in diag["reason"]
    assert not any("relay buffer dropped" in w for w in result.warnings)
    assert any(w.startswith("sda.blktrace.0, byte 480: corrupt record") for w in result.warnings)


def test_strict_mode_fails_at_the_damaged_record(tmp_path: Path) -> None:
    """strict=True (manifest or upload field) turns the same damage into a ParseError."""
    with pytest.raises(ParseError) as ei:
        parse_blktrace_bytes(_corrupt_pdu_len(), name="sda.blktrace.0", strict=True)
    assert ei.value.offset == 480
    assert "payload length 32784 is larger than any blktrace payload" in ei.value.reason
    p = tmp_path / "sda.blktrace.0"
    p.write_bytes(_corrupt_pdu_len())
    with pytest.raises(ParseError, match="byte 480: corrupt record"):
        ingest([p], names=["sda.blktrace.0"], strict=True)


def test_strict_mode_from_the_manifest(tmp_path: Path) -> None:
    """``strict = true`` in blkreview.toml selects strict mode for the bundle's files."""
    trace = tmp_path / "sda.blktrace.0"
    trace.write_bytes(_corrupt_pdu_len())
    manifest = tmp_path / "blkreview.toml"
    manifest.write_text('kernel = "6.18.0"\nstrict = true\n')
    with pytest.raises(ParseError, match="strict mode refuses damaged files"):
        ingest([manifest, trace], names=["blkreview.toml", "sda.blktrace.0"])
    manifest.write_text('kernel = "6.18.0"\nstrict = false\n')
    assert len(ingest([manifest, trace], names=["blkreview.toml", "sda.blktrace.0"]).table) == 999
    manifest.write_text('strict = "yes"\n')
    with pytest.raises(ParseError, match="strict must be true or false"):
        ingest([manifest, trace], names=["blkreview.toml", "sda.blktrace.0"])


def test_small_wrong_length_drops_only_that_record() -> None:
    """pdu_len 0 -> 8: the real next header sits inside the claimed payload, so the length
    is wrong; that record is dropped and 48 bytes skipped, the rest is read."""
    data = bytearray(_records(6))
    struct.pack_into("<H", data, 96 + PDU_LEN_AT, 8)
    raw = parse_blktrace_bytes(bytes(data), name="t")
    assert raw.table.seq.tolist() == [1, 2, 4, 5, 6]
    assert [(d["offset"], d["skipped_bytes"]) for d in raw.diagnostics] == [(96, 48)]
    assert "does not lead to the next record header" in raw.diagnostics[0]["reason"]


def test_garbage_between_records_keeps_the_record_before() -> None:
    """Overwritten header bytes: the record before is whole, the damaged one is skipped."""
    data = bytearray(_records(4))
    data[96:100] = b"\xde\xad\xbe\xef"
    raw = parse_blktrace_bytes(bytes(data), name="t")
    assert raw.table.seq.tolist() == [1, 2, 4]
    assert [(d["offset"], d["skipped_bytes"]) for d in raw.diagnostics] == [(96, 48)]
    assert "bad magic 0xefbeadde" in raw.warnings[0]
    with pytest.raises(ParseError, match="bad magic 0xefbeadde") as ei:
        parse_blktrace_bytes(bytes(data), name="t", strict=True)
    assert ei.value.offset == 96


def test_mostly_corrupt_file_is_refused() -> None:
    """More damaged bytes than good ones: not a usable trace, whatever the mode."""
    data = bytearray(_records(10))
    data[48:400] = bytes(352)
    with pytest.raises(ParseError, match="bytes are corrupt"):
        parse_blktrace_bytes(bytes(data), name="t")


def test_too_many_corrupt_regions_is_refused() -> None:
    """Damage every other record: more than MAX_REGIONS regions fail the file."""
    data = bytearray(_records(4 * MAX_REGIONS))
    for i in range(1, 4 * MAX_REGIONS, 3):
        data[48 * i:48 * i + 4] = b"\0\0\0\0"
    with pytest.raises(ParseError, match=f"more than {MAX_REGIONS} corrupt regions"):
        parse_blktrace_bytes(bytes(data), name="t")


def test_real_gap_is_still_a_relay_drop() -> None:
    """An intact file with missing sequence numbers keeps its relay-buffer warning."""
    table = EventTable({"time_ns": [1, 2, 3], "seq": [1, 2, 9], "dev": [make_dev(8, 0)] * 3,
                        "cpu": [0] * 3, "pid": [7] * 3, "action": [ACT_QUEUE] * 3,
                        "rwbs": [RWBS_READ] * 3, "sector": [0, 8, 16], "nr_sectors": [8] * 3})
    raw = parse_blktrace_bytes(encode_blktrace(table, process_notes=False))
    assert [d["kind"] for d in raw.diagnostics] == ["sequence_gap"]


SEED = encode_blktrace(all_actions_table())


@settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "0") or 0) or 300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(SEED) - 1), st.integers(0, 255)), max_size=6),
       st.booleans(), st.integers(0, 3))
def test_python_twin_matches_the_compiled_walk(flips: list[tuple[int, int]], strict: bool,
                                               pdu_hits: int) -> None:
    """walk_records_py (readable) and the numba first pass agree on damaged streams: status,
    counts, error offset and value, and every skipped region."""
    data = bytearray(SEED)
    for pos, value in flips:
        data[pos] = value
    # aim some damage at pdu_len fields, the case this is about
    pos = 0
    for _ in range(pdu_hits):
        pdu = int.from_bytes(data[pos + PDU_LEN_AT:pos + PDU_LEN_AT + 2], "little")
        nxt = pos + 48 + pdu
        struct.pack_into("<H", data, pos + PDU_LEN_AT, (pdu + 48 * 7) % (MAX_PDU * 2))
        if nxt + 48 > len(data):
            break
        pos = nxt
    buf = np.frombuffer(bytes(data), dtype=np.uint8)
    if int.from_bytes(data[:4], "little") & 0xFFFFFF00 != 0x65617400 or data[0] != 7:
        return
    regions = np.zeros((MAX_REGIONS, 4), np.int64)
    compiled = _walk(buf, False, 7, strict, regions)
    twin = walk_records_py(bytes(data), False, 7, strict)
    assert tuple(int(x) for x in compiled[:5]) == twin[:5]
    assert [tuple(int(x) for x in regions[i]) for i in range(int(compiled[5]))] == twin[5]
