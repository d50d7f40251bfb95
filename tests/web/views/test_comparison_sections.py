"""The finished comparison page: lazy sections, their JSON, the report download."""

from __future__ import annotations

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

SECTIONS = ("fragmentation", "seek", "throughput", "latency", "ordering", "model")


def _section(client, comparison, name, **params):
    return client.get(reverse("comparison-section", args=[comparison.pk, name]), params)


def test_page_is_a_frame_of_lazy_sections(client, finished_comparison):
    """The HTML has the check, report buttons, device selector and one lazy block per section."""
    html = client.get(finished_comparison.get_absolute_url()).content.decode()
    for name in SECTIONS:
        assert f'data-section="{name}"' in html
    assert 'id="device-select"' in html and '<option value="9,0" data-name=' in html
    assert 'id="report-download"' in html and 'id="report-copy"' in html
    assert 'id="check-state"' in html
    assert "Runs: single run" in html
    assert 'id="figures-data"' in html and "seek-baseline" not in html  # no inline figures


def test_every_section_serves_side_by_side_charts_with_shared_axes(client, finished_comparison):
    """Each section's JSON has charts whose panels share the y range (histograms) or x range."""
    for name in SECTIONS:
        r = _section(client, finished_comparison, name, dev="254,0")
        assert r.status_code == 200, (name, r.content[:300])
        data = r.json()
        assert data["section"] == name and data["dev"] == "254,0"
        assert data["charts"], name
        for chart in data["charts"]:
            panels = chart["panels"]
            sides = [p["side"] for p in panels]
            assert sides[:2] == ["baseline", "patched"], (name, chart["id"])
            layouts = [p["figure"]["layout"] for p in panels]
            for axis in ("xaxis", "yaxis"):
                ranges = [lay[axis].get("range") for lay in layouts]
                cats = [lay[axis].get("categoryarray") for lay in layouts]
                assert all(x == ranges[0] for x in ranges) and all(x == cats[0] for x in cats)
            colors = {p["side"]: p["figure"]["data"][0].get("marker", p["figure"]["data"][0]
                                                             .get("line", {})).get("color")
                      for p in panels}
            assert colors["baseline"] == "#1f77b4" and colors["patched"] == "#ff7f0e"


def test_seek_stage_selector_changes_the_histogram(client, finished_comparison):
    """?stage=Q and ?stage=D give different seek histograms on a member disk (Q vs D)."""
    d = _section(client, finished_comparison, "seek", dev="9,0").json()
    assert d["stage"] == "Q" and d["stages"] == ["Q", "C"]  # md0 has only Q and C events
    disk = _section(client, finished_comparison, "seek", dev="254,0").json()
    assert set(disk["stages"]) >= {"Q", "G", "D"}
    q = _section(client, finished_comparison, "seek", dev="254,0", stage="Q").json()
    assert q["stage"] == "Q" and disk["stage"] == "D"
    assert "(Q stage)" in q["charts"][0]["title"] and "(D stage)" in disk["charts"][0]["title"]
    assert "Read|Write seek" in disk["text"]["baseline"]
    assert _section(client, finished_comparison, "seek", dev="254,0", stage="X").status_code == 404
    assert _section(client, finished_comparison, "nope").status_code == 404
    assert _section(client, finished_comparison, "seek", dev="1,2").status_code == 404


def test_tables_carry_delta_pct_and_verdict_columns(client, finished_comparison):
    """Key-number tables have absolute, delta, % and verdict columns."""
    data = _section(client, finished_comparison, "throughput", dev="254,0").json()
    table = data["tables"][0]
    assert table["columns"][:6] == ["", "Baseline", "Patched", "Δ", "Δ %", "Verdict"]
    row = next(r for r in table["rows"] if r[0].startswith("Throughput"))
    b, p = float(row[1].replace(",", "")), float(row[2].replace(",", ""))
    assert abs(float(row[3].replace(",", "")) - (p - b)) <= 0.011
    assert row[4] == f"{100 * (p - b) / b:+.1f}%" or abs(float(row[4][:-1]) - 100 * (p - b) / b) < 0.2
    # one small run per member: no timing claim, and the row says why
    assert row[5].startswith("not judged (too few events: 50 requests")


def test_model_section_shows_four_sides_and_policies(client, finished_comparison):
    """Observed baseline/patched and predicted old/new, with the policies named."""
    data = _section(client, finished_comparison, "model", dev="254,0").json()
    assert "error" not in data, data.get("error")
    sides = [p["side"] for p in data["charts"][0]["panels"]]
    assert sides == ["baseline", "patched", "predicted_old", "predicted_new"]
    assert any("split_remainder=head" in n for n in data["notes"])


def test_report_download_is_plain_text(client, finished_comparison):
    """report.txt is text/plain with the seek histograms in the seed 000 layout."""
    r = client.get(reverse("comparison-report", args=[finished_comparison.pk]))
    if r.status_code == 404:
        pytest.fail("no report stored (workers.report.render_report missing?)")
    assert r["Content-Type"].startswith("text/plain")
    assert "attachment" in r["Content-Disposition"]
    assert "seek" in r.content.decode().lower()


def test_section_before_compare_step_is_pending(client, user, make_upload, seed000_before,
                                                seed000_after):
    """Before the comparison step, a section answers 202 pending."""
    from reviewapp.services.comparisons import submission_create

    comparison, _ = submission_create(title="t", user=user,
                                      baseline_files=[make_upload("b.txt", seed000_before)],
                                      patched_files=[make_upload("a.txt", seed000_after)])
    r = _section(client, comparison, "seek")
    assert r.status_code == 202 and r.json()["pending"] is True


def test_progress_of_finished_comparison_is_complete(client, finished_comparison):
    """progress.json reports the comparison step and complete once it has succeeded."""
    p = client.get(reverse("comparison-progress", args=[finished_comparison.pk])).json()
    assert p["done"] and p["complete"]
    assert p["compare"]["state"] == "succeeded" and p["compare"]["progress"] == 100


@pytest.fixture
def demo_comparisons(db):
    """The two demo comparisons of load_demo (seed 000 G lines; 6.1 vs 7.2 raid5 captures)."""
    import io

    from django.core.management import call_command

    from reviewapp.models import Comparison

    call_command("load_demo", stdout=io.StringIO())
    return list(Comparison.objects.order_by("pk"))


def test_seed000_g_lines_show_dash_and_reason_not_zero(client, demo_comparisons):
    """Seed 000 (G events only): iostat -x cells are – with "no D/C events: stage G", not 0.00."""
    seed = demo_comparisons[0]
    data = _section(client, seed, "throughput", dev="8,0").json()
    # a table of dashes adds nothing: no table, and the note says why
    assert not [t for t in data["tables"] if t["id"] == "iostat"]
    assert "No iostat -x table, baseline and patched: no D/C events: stage G." in data["notes"]
    frag = _section(client, seed, "fragmentation", dev="8,0").json()
    pieces = next(r for r in frag["tables"][0]["rows"] if r[0] == "Pieces per bio")
    assert pieces[1] is None and any("no Q events" in n for n in frag["notes"])
    report = client.get(reverse("comparison-report", args=[seed.pk])).content.decode()
    table = report.split("1) iostat results (computed from the trace):\n", 1)[1].split("\n2)")[0]
    assert "0.00" not in table and '(no row for 8,0: no D/C events: stage G)' in table


def test_empty_histogram_side_is_a_note_not_empty_axes(client, demo_comparisons):
    """Patched seed 000 has no backward dispatch: its panel says so instead of empty axes."""
    data = _section(client, demo_comparisons[0], "ordering", dev="8,0").json()
    chart = next(c for c in data["charts"] if c["id"] == "backward")
    panels = {p["side"]: p for p in chart["panels"]}
    assert panels["baseline"]["figure"]["data"][0]["y"]
    assert panels["patched"]["figure"] is None
    assert panels["patched"]["empty"] == "no backward dispatches"


def test_model_without_q_events_is_a_note_not_a_failure(client, demo_comparisons):
    """Seed 000's G lines cannot be replayed: the model section explains, it does not fail."""
    data = _section(client, demo_comparisons[0], "model", dev="8,0").json()
    assert "error" not in data
    assert data["notes"][0].startswith("No model panel: the baseline trace has no Q events")


def test_raid5_demo_opens_on_a_d_stage_member_with_folded_file_list(client, demo_comparisons):
    """Comparison 2 opens on vda (stage D), names each device's stage, folds per-CPU files."""
    html = client.get(demo_comparisons[1].get_absolute_url()).content.decode()
    assert '<option value="254,0" data-name="vda" selected>vda (254,0) · stage D</option>' in html
    assert '<option value="9,0" data-name="md0">md0 (9,0) · stage Q</option>' in html
    # the all-members view of md0, right after md0
    assert html.index('value="members:9,0"') < html.index('value="254,0"')
    assert "all members of md0 (8 devices) · stage D</option>" in html
    assert ("19 files: blkreview.toml (manifest); blktrace per CPU 0,1: md0, vda, vdb, vdc, "
            "vdd, vde, vdf, vdg, vdh") in html
    reasons = demo_comparisons[1].result.verdict["reasons"]
    if len(reasons) > 8:  # a long check list shows 8 and folds the rest
        assert html.count("<li>", html.index('id="check-reasons"'), html.index("CI: ")) == len(
            reasons)
        assert f"{len(reasons) - 8} more reasons" in html
    seek = _section(client, demo_comparisons[1], "seek", dev="254,0").json()
    assert seek["stage"] == "D" and seek["charts"][0]["panels"][0]["figure"]["data"][0]["y"]


def test_lba_is_zoomed_per_side_and_marks_seed000_backward_steps(client, demo_comparisons):
    """Seed 000's two sides sit 7M sectors apart: each LBA panel spans its own sectors, the
    chart carries the range of both for the toggle, and the 3 backward steps before the patch
    are drawn (none after)."""
    data = _section(client, demo_comparisons[0], "ordering", dev="8,0").json()
    lba = next(c for c in data["charts"] if c["id"] == "lba")
    base, patched = lba["panels"]
    yb = base["figure"]["layout"]["yaxis"]["range"]
    yp = patched["figure"]["layout"]["yaxis"]["range"]
    assert yb[0] > yp[1]  # disjoint: one shared range would flatten both
    assert lba["shared_y"][0] <= yp[0] and lba["shared_y"][1] >= yb[1]
    back = [t for t in base["figure"]["data"] if t["name"] == "backward step"]
    assert len(back) == 1 and len(back[0]["y"]) == 3
    assert "3 backward steps" in base["figure"]["layout"]["title"]["text"]
    assert not [t for t in patched["figure"]["data"] if t["name"] == "backward step"]
    x_labels = base["figure"]["data"][0]["x"]
    assert x_labels  # times
    hist = next(c for c in data["charts"] if c["id"] == "backward")
    assert hist["panels"][0]["figure"]["data"][0]["x"][-1] == "[256, 512)"


def test_selected_stage_has_its_note_and_zero_seek_share(client, demo_comparisons):
    """md0 at stage C: the note names stage C (not md0's default Q) and the zero-seek share
    is computed, not '–'."""
    data = _section(client, demo_comparisons[1], "seek", dev="9,0", stage="C").json()
    assert data["stage"] == "C" and data["default_stage"] == "Q"
    assert data["stage_note"]["baseline"].startswith("stage C")
    row = next(r for r in data["tables"][0]["rows"] if r[0].startswith("Zero-seek share"))
    assert row[1] is not None and row[2] is not None


def test_all_members_view_sums_the_members(client, demo_comparisons):
    """members:9,0 is every member of md0 together: 8 x 50 requests per side."""
    data = _section(client, demo_comparisons[1], "fragmentation", dev="members:9,0").json()
    assert data["name"] == "all members of md0"
    sizes = next(c for c in data["charts"] if c["id"] == "sizes")
    assert sum(sizes["panels"][0]["figure"]["data"][0]["y"]) == 400
    assert any("All 8 members of md0" in n for n in data["notes"])


def test_report_download_has_the_header_and_fits_72_columns(client, demo_comparisons):
    """The raid5 demo's report: title, the page's absolute URL, both kernels, workload and
    stack from the bundles; sides named by kernel (the title is not a patch subject); the
    model's fidelity against both sides; no line wider than 72 columns."""
    cmp_ = demo_comparisons[1]
    text = client.get(reverse("comparison-report", args=[cmp_.pk])).content.decode()
    lines = text.splitlines()
    assert f"http://testserver{cmp_.get_absolute_url()}" in lines[:4]
    head = "\n".join(lines[:12])
    assert "Kernels:    baseline 6.1.0-57-amd64, patched 7.2.13+deb14-amd64" in head
    assert "Workload:   dd if=/dev/md0 of=/dev/null bs=2M count=100 iflag=direct" in head
    assert "Stack:      md raid5 of 8 virtio disks" in head
    assert "Baseline, kernel 6.1.0-57-amd64:" in text and "Before this patch" not in text
    assert "Model fidelity, new policy vs observed patched side:" in text
    assert [x for x in lines if len(x) > 72] == []
    seed = client.get(reverse("comparison-report", args=[demo_comparisons[0].pk])).content.decode()
    assert "Before this patch:" in seed and "After this patch:" in seed
