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
    assert 'id="device-select"' in html and '<option value="9,0">' in html
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
    assert row[5] == "single run"  # one run per side: no significance claimed


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
