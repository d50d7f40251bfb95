"""The plain-text report as a mail reply: header, 72 columns, units, no made-up lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.analyzers import analyze
from workers.compare import compare
from workers.report import WIDTH, ReportHeader, render_report
from workers.traces import ingest

DEMO = Path(__file__).resolve().parents[2] / "reviewapp" / "demo"
TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"


def _run(path: Path) -> dict:
    files = sorted(path.iterdir()) if path.is_dir() else [path]
    ing = ingest(files, names=[f.name for f in files])
    return analyze(ing.table, summaries=ing.summaries)


@pytest.fixture(scope="module")
def raid5() -> dict:
    return compare([_run(DEMO / "k61_W1b")], [_run(DEMO / "k72_W1b")])


def _widths(text: str) -> list[tuple[int, str]]:
    return [(len(x), x) for x in text.splitlines() if len(x) > WIDTH]


def test_header_names_what_was_compared_and_every_line_fits_72_columns(raid5) -> None:
    """Title, URL, both kernels, workload, stack and Message-ID head the report; no line of
    the raid5 demo's report (8 members, 50 check reasons) is wider than 72 columns."""
    header = ReportHeader(title="block: place split bios at the head of current->bio_list",
                          url="http://example.org/comparisons/2/",
                          baseline_kernel="6.1.0-57-amd64", patched_kernel="7.2.13+deb14-amd64",
                          workload="dd if=/dev/md0 of=/dev/null bs=2M count=100 iflag=direct",
                          stack="md raid5 of 8 virtio disks", message_id="<abc@kernel.org>",
                          has_patch=True)
    text = render_report(raid5, header=header)
    lines = text.splitlines()
    assert lines[0] == "block: place split bios at the head of current->bio_list"
    assert lines[1] == "http://example.org/comparisons/2/"
    head = "\n".join(lines[:10])
    for needle in ("Kernels:    baseline 6.1.0-57-amd64, patched 7.2.13+deb14-amd64",
                   "Workload:   dd if=/dev/md0", "Stack:      md raid5 of 8 virtio disks",
                   "Message-ID: <abc@kernel.org>"):
        assert needle in head
    assert "Before this patch:" in text and "After this patch:" in text
    assert _widths(text) == []
    assert len(lines) > 100  # the whole report was checked, not a stub


def test_without_a_patch_the_sides_are_named_by_their_kernels(raid5) -> None:
    """No patch: "Baseline, kernel 6.1..." instead of "Before this patch"."""
    text = render_report(raid5, header=ReportHeader(baseline_kernel="6.1.0-57-amd64",
                                                    patched_kernel="7.2.13+deb14-amd64"))
    assert "Before this patch" not in text and "After this patch" not in text
    assert "Baseline, kernel 6.1.0-57-amd64:" in text
    assert "Patched, kernel 7.2.13+deb14-amd64:" in text
    assert text.splitlines()[0] == "6.1.0-57-amd64 vs 7.2.13+deb14-amd64"


def test_every_check_reason_is_printed_once_with_device_names() -> None:
    """No "... and N more": every reason is there; eight members' identical reason is one line
    naming them; an rMB/s reason is not repeated beside an identical MB/s one."""
    from workers.report import check_reasons

    members = [f"254,{16 * i}" for i in range(8)]
    names = {d: f"vd{chr(ord('a') + i)}" for i, d in enumerate(members)}
    names["9,0"] = "md0"
    reasons = ([f"{d} MB/s: 100.3 MB/s -> 80.53 MB/s (-19.7%) drops more than 10%"
                for d in members]
               + ["9,0 MB/s: 802.3 -> 644.2 (-19.7%) drops", "9,0 rMB/s: 802.3 -> 644.2 (-19.7%) drops"]
               + [f"9,0 reason {i}" for i in range(40)])
    lines = check_reasons(reasons, names)
    assert lines[0] == ("  - vda, vdb, vdc, vdd, vde, vdf, vdg, vdh MB/s: 100.3 MB/s -> "
                        "80.53 MB/s (-19.7%) drops more than 10%")
    assert "  - md0 MB/s: 802.3 -> 644.2 (-19.7%) drops" in lines
    assert not any("rMB/s" in x for x in lines)
    assert len(lines) == 1 + 1 + 40 and not any("more" in x for x in lines[2:])
    cmp = {"runs": {"baseline": 1, "patched": 1}, "sides": {}, "metrics": [],
           "check": {"state": "fail", "reasons": reasons}}
    text = render_report(cmp)
    assert text.count("  - 9,0 reason") == 40 and "... and" not in text  # no names known here


def test_units_are_written_as_people_write_them(raid5) -> None:
    """Shares as %, IOPS without "1/s", latencies in us."""
    text = render_report(raid5)
    assert "1/s" not in text
    assert "md0 IOPS: 1605 -> 1288" in text
    assert "us ->" in text


def test_identical_member_fidelity_is_one_line() -> None:
    """Eight members with the same fidelity print one line, not eight."""
    cmp = {"runs": {"baseline": 1, "patched": 1}, "sides": {}, "metrics": [],
           "fidelity": {f"254,{16 * i}": {"seek_l1": 0.0, "size_l1": 0.0,
                                          "throughput_rel_err": 0.19, "matched_in_order": 1.0}
                        for i in range(8)}}
    text = render_report(cmp)
    block = text.split("Model fidelity, old policy vs observed baseline:")[1]
    assert block.count("8 devices, identical") == 1 and block.count("254,16") == 0


def test_model_panel_fidelity_on_both_sides_and_unexercised_fields() -> None:
    """With the model panel: the policy fields that differ (marked when not exercised) and the
    fidelity of the new policy against the patched side."""
    model = {"state": "ok", "policy_old_label": "linux-6.1.192",
             "policy_new_label": "the presets of both kernels",
             "policy_diff": [{"field": "dio_bio_limit", "old": "vecs", "new": "pages",
                              "exercised": False, "why": "fixed"}],
             "fidelity": {"9,0": {"size_l1": 0.0}}, "fidelity_new": {"9,0": {"size_l1": 2.0}}}
    cmp = {"runs": {"baseline": 1, "patched": 1}, "sides": {}, "metrics": []}
    text = render_report(cmp, model=model)
    assert "dio_bio_limit: vecs -> pages (not exercised by this input)" in text
    assert "Model fidelity, new policy vs observed patched side:\n  9,0: size L1 2.000" in text


def test_ftrace_lines_without_time_are_not_dressed_as_blkparse() -> None:
    """Bare ftrace event lines (no TASK-PID [CPU] TIME prefix) carry no time and no pid: the
    report prints the request fields only and says the trace has no time or pid."""
    src = Path(__file__).resolve().parents[1] / "data" / "seeds" / "001_ftrace_excerpt.txt"
    r = _run(src)
    assert r["time_known"] is False
    text = render_report(compare([r], [r]))
    block = text.split("first issue-order lines of 8,32, stage D")[1].split("\n3)")[0]
    assert "the trace has no time or pid" in " ".join(block.split())
    quoted = [x for x in block.splitlines() if x.startswith("  8,32 ")]
    assert quoted[0] == "  8,32 D R 86925864 + 1024 [Thread-51]"
    assert all(" 0.000" not in x for x in quoted)
    assert _widths(text) == []
