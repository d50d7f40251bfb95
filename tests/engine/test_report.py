"""render_report(): the seed-style plain-text report of a comparison."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "analyzers"))
from analyzer_helpers import (  # noqa: E402
    fold,
    requests,
    sectors_from_gaps,
    seed_seek_blocks,
    seed_text,
    stream,
)

from workers.analyzers import analyze  # noqa: E402
from workers.compare import compare as _compare  # noqa: E402
from workers.events import EventTable, make_dev  # noqa: E402
from workers.report import ReportHeader, iostat_table, render_report  # noqa: E402
from workers.summary import with_summary  # noqa: E402


def _seed000_side(gaps: list[int]) -> dict:
    return analyze(stream(sectors_from_gaps(gaps), 128))


def test_report_has_seed000_histograms_before_and_after() -> None:
    """The report carries the seed's seek blocks before and after, line for line."""
    before_gaps = ([0] * 25079 + [64] * 12540 + [128] * 2508 + [512] * 10032 + [1024] * 5016)
    after_gaps = [0] * 21483 + [64] * 7161
    cmp = compare([_seed000_side(before_gaps)], [_seed000_side(after_gaps)])
    text = render_report(cmp, title="block: place split bios at the head")
    lines = fold(text)
    seed = seed_seek_blocks(seed_text("000_bd92b2ca435366b4.txt"))

    def no_bar(line: str) -> str:
        # the mail report's bar is 39 '#' at most (72 columns), the seed's 40
        return line.split("|")[0]

    for block in seed:
        i = lines.index(block[1])  # "cnt N, zero cnt Z"
        assert [no_bar(x) for x in lines[i - 1: i - 1 + len(block)]] == [no_bar(x) for x in block]
        assert max(len(x.split("|")[1].strip()) for x in lines[i + 2: i - 1 + len(block)]) == 39
    assert lines[0] == "block: place split bios at the head"
    text = render_report(cmp, header=ReportHeader(title="block: place split bios at the head",
                                                  message_id="x@y", has_patch=True))
    assert text.index("Before this patch:") < text.index("cnt 55175") < text.index(
        "After this patch:") < text.index("cnt 28644")
    assert "zero-seek share" in text and "single run" in text


def test_iostat_table_rows_groups_and_columns() -> None:
    """Device rows then the sd* mean row; write columns only when there are writes."""
    rows = {"8,0": {"r/s": 10.0, "rMB/s": 1.0, "%util": 50.0},
            "8,16": {"r/s": 30.0, "rMB/s": 3.0, "%util": 70.0}}
    groups = [{"name": "sd*", "members": ["8,0", "8,16"],
               "row": {"r/s": 20.0, "rMB/s": 2.0, "%util": 60.0}}]
    text = iostat_table({"rows": rows, "groups": groups}, {"8,0": "sda", "8,16": "sdb"})
    lines = fold(text)
    assert lines[0].startswith("Device r/s rMB/s rrqm/s %rrqm r_await rareq-sz")
    assert "w/s" not in lines[0] and lines[0].endswith("aqu-sz %util")
    assert lines[1].startswith("sda 10.00 1.00") and lines[3].startswith("sd* 20.00 2.00")
    assert lines[3].endswith("60.00")


def test_report_check_reasons_and_two_devices() -> None:
    """A throughput drop over 3 runs per side fails the check with its statistics; both disks
    appear, rolled up into their group; the summary heads the report."""
    def side(us: int, jitter: int) -> dict:
        n = 200
        a = requests([(i * 128, 128, "R", {"D": i * (us + jitter) * 1_000_000,
                                           "C": i * (us + jitter) * 1_000_000 + 1000})
                      for i in range(n)])
        b = requests([(i * 128, 128, "R", {"D": i * (us + jitter) * 1_000_000,
                                           "C": i * (us + jitter) * 1_000_000 + 1000})
                      for i in range(n)], dev=make_dev(8, 16))
        return analyze(EventTable.concat([a, b]).sorted_by_time())

    cmp = compare([side(10, j) for j in (0, 1, 2)], [side(20, j) for j in (0, 1, 2)])
    text = render_report(cmp)
    flat = " ".join(text.split())  # the report wraps at 72 columns
    assert "Check: FAIL" in text and "drops more than 10%" in flat
    # one reason for both disks: their roll-up, not one per disk
    assert "members 8,* MB/s: " in text and "- 8,0 MB/s" not in text
    assert "Welch p=" in text and "95% CI" in flat
    assert "io seek for 8,0, 8,16 (identical), stage D:" in text
    assert "8,* " in text  # the mean row of the two member disks
    assert "Summary:" in text.splitlines()[:6]
    assert "timing: regressed: members 8,* MB/s" in flat


def test_report_shows_measured_iostat_from_the_bundle() -> None:
    """A bundle's own iostat rows (last sample) are printed beside the computed table."""
    base = analyze(stream([0, 8], 8), summaries={"iostat": [
        {"device": "md0", "sample": 0, "r/s": 1.0, "rMB/s": 1.0},
        {"device": "md0", "sample": 1, "r/s": 52430.0, "rMB/s": 3276.87, "util": 80.1}]})
    patched = analyze(stream([0, 8], 8), summaries={"iostat": [
        {"device": "md0", "sample": 1, "r/s": 87965.0, "rMB/s": 5271.88, "util": 90.6}]})
    text = render_report(compare([base], [patched]))
    lines = fold(text)
    i = lines.index("2) iostat -x as measured (from the bundle, last sample):")
    assert lines[i + 1] == "Device r/s rMB/s %util"
    assert lines[i + 2] == "md0 52430.00 3276.87 80.10"
    assert "md0 87965.00 5271.88 90.60" in lines
    assert "iostat md0 rMB/s" in text  # compared as a metric too


def test_report_quotes_first_issue_order_lines() -> None:
    """Like the seed's 'blktrace G stage' quote: the first D lines of a disk, in issue order."""
    r = analyze(stream([14071424, 14071168, 14071296], 128))
    text = render_report(compare([r], [r]))
    lines = fold(text)
    i = next(n for n, x in enumerate(lines)
             if x.startswith("2) first issue-order lines of 8,0, stage D (device time pid"))
    i += 1  # the field list wraps onto a second line
    assert lines[i + 1].endswith("D R 14071424 + 128 [(null)]")
    assert lines[i + 2].endswith("D R 14071168 + 128 [(null)]")


def test_report_numbers_have_no_exponent() -> None:
    """Large values print as whole numbers (14688 us), not 1.469e+04; small keep 4 digits."""
    from workers.compare import format_value, num

    assert num(14687.9) == "14688" and num(2096.4) == "2096" and num(0.86664) == "0.8666"
    assert num(123456.0, 2) == "123456" and num(45.67, 2) == "46"
    assert format_value(14_687_900.0, "ns") == "14688 us"


def test_iostat_table_prints_dash_and_reason_for_unknown_columns() -> None:
    """A column the analyzers could not compute (None) prints as "-" with the reason, never 0.00."""
    from workers.analyzers.throughput import IOSTAT_COLUMNS
    from workers.report import iostat_table

    row = {**dict.fromkeys(IOSTAT_COLUMNS), "note": "no D/C events: stage G"}
    text = iostat_table({"rows": {"8,0": row}, "groups": []}, {"8,0": "sda"})
    lines = text.splitlines()
    assert lines[1].split() == ["sda"] + ["-"] * (len(lines[0].split()) - 1)
    assert "0.00" not in text and '"-" for sda: no D/C events: stage G' in text
    # the mail report drops a row of dashes and keeps its reason
    text = iostat_table({"rows": {"8,0": row}, "groups": []}, {"8,0": "sda"}, drop_empty=True)
    assert text.strip() == "(no row for sda: no D/C events: stage G)"


def compare(*args, **kwargs):  # type: ignore[no-redef]
    """compare() with the summary in words, as the CLI and the worker produce it."""
    return with_summary(_compare(*args, **kwargs))
