"""Management commands: load_demo, import_bundle, rerun_jobs."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from reviewapp.models import AnalysisJob, BundleResult, Comparison, TraceBundle
from reviewapp.tasks import run_analysis
from tests.conftest import past_head

pytestmark = pytest.mark.django_db


def test_load_demo_creates_user_and_analyzed_comparisons():
    """load_demo prints the login, leaves seed 000 (1) and the raid5 captures (2) analyzed."""
    out = io.StringIO()
    call_command("load_demo", stdout=out)
    text = out.getvalue()
    assert "Demo login: user 'demo', password 'demo-blkreview'" in text
    seed, raid5 = Comparison.objects.filter(patch__series__isnull=True,
                                            patch__commit="").order_by("pk")
    assert f"/comparisons/{seed.pk}/" in text and f"/comparisons/{raid5.pk}/" in text
    assert seed.status == "ready" and raid5.status == "ready"
    seek = seed.baseline_bundles.get().result.data["devices"]["8,0"]["seek"]
    assert (seek["cnt"], seek["zero_cnt"]) == (6, 1)
    # the real captures: binary blktrace of md0 + 8 members, D-stage on the members
    data = raid5.baseline_bundles.get().result.data
    assert data["devices"]["254,0"]["stage"] == "D" and "9,0" in data["devices"]
    assert data["devices"]["254,0"]["throughput"]["iostat"]["r/s"] > 0
    assert raid5.patched_bundles.get().kernel.startswith("7.2")
    model = raid5.result.model or {}
    assert model and not model.get("error"), model.get("error")
    # the three-version series: a comparison per version, v2 fixes the backward seeks
    from reviewapp.models import Check, Series, Thread, Verdict

    v3 = Series.objects.get(version=3)
    assert f"/series/{v3.pk}/" in text
    per_version = Comparison.objects.filter(patch__series__isnull=False)
    assert per_version.count() == 3 and {x.status for x in per_version} == {"ready"}
    assert Thread.objects.filter(anchor_kind="metric", resolved=True).count() == 1
    assert Thread.objects.filter(anchor_kind="diff").count() == 1
    assert Verdict.objects.count() == 2
    assert sorted(Check.objects.values_list("state", flat=True)) == ["fail", "success",
                                                                     "success"]
    # a time-window thread on v2's throughput; Fixes:-aware pairing for patch 2; sharing
    window = Thread.objects.get(anchor_kind="chart")
    assert window.anchor["chart"] == "mbps" and window.anchor["x0"] < window.anchor["x1"]
    from reviewapp.access import grants_on
    from reviewapp.selectors import fixes_offers

    fixing = v3.patches.get(position=2)
    assert f"/upload/?patch={fixing.pk}" in text
    [offer] = fixes_offers(fixing, v3.submitted_by)
    assert offer["match"] == "sha" and [x.status for x in offer["comparisons"]] == ["ready"]
    assert [g.user.username for g in grants_on(v3)] == ["reviewer"]
    from reviewapp.access import can_set_patch_state

    reviewer = grants_on(v3).get().user
    assert can_set_patch_state(reviewer, Series.objects.get(version=1).patches.first())
    from django.test import Client

    html = Client().get(f"/series/{v3.pk}/").content.decode()
    row = html[html.index('data-metric="backward dispatches"'):]
    row = row[:row.index("</tr>")]
    assert '<span class="step better">Δ -100.0%</span>' in row  # v2 fixed it
    call_command("load_demo", stdout=io.StringIO())
    assert Comparison.objects.count() == 6 and Series.objects.count() == 3
    from django.contrib.auth import authenticate

    assert authenticate(username="demo", password="demo-blkreview") is not None


def test_import_bundle_and_rerun_failed(tmp_path, seed000_before):
    """import_bundle stores files; a parse failure is not rerun by --failed (it would fail
    again) but by --parse-failed (after a parser fix)."""
    good = tmp_path / "g.txt"
    good.write_bytes(seed000_before)
    bad = tmp_path / "b.txt"
    bad.write_bytes(past_head(seed000_before) + b"8,0 0 1 1.0 1 G R x + 8 [dd]\n")
    out = io.StringIO()
    call_command("import_bundle", str(good), "--kernel", "6.1", stdout=out)
    assert "created" in out.getvalue()
    out = io.StringIO()
    call_command("import_bundle", str(good), stdout=out)
    assert "created" in out.getvalue()  # a bundle per upload, bytes shared in storage
    call_command("import_bundle", str(bad), "--role", "patched", stdout=io.StringIO())
    for job in AnalysisJob.objects.all():
        run_analysis(job.pk)
    failed = TraceBundle.objects.get(parse_status="failed")
    with pytest.raises(SystemExit) as exit_:
        call_command("rerun_jobs", "--failed", stdout=io.StringIO(), stderr=io.StringIO())
    assert exit_.value.code == 2
    out = io.StringIO()
    call_command("rerun_jobs", "--parse-failed", stdout=out)
    assert f"bundle {failed.pk}: queued job" in out.getvalue()
    assert AnalysisJob.objects.filter(bundle=failed, state="queued").count() == 1
    assert BundleResult.objects.count() == 2  # the two good imports, one bundle each


def test_import_bundle_refuses_unknown_format(tmp_path):
    """A file that is no trace is refused with the reason."""
    f = tmp_path / "x.txt"
    f.write_text("not a trace\n")
    with pytest.raises(CommandError, match="x.txt: not a recognised"):
        call_command("import_bundle", str(f))


def test_rerun_jobs_needs_a_selection():
    """Without --failed/--bundle/--all the command refuses."""
    with pytest.raises(CommandError):
        call_command("rerun_jobs")
