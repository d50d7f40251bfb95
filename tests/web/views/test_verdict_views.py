"""Reviewer verdicts on patches and series: recorded from the pages, shown, exported as
trailer lines with the plain-text report."""

from __future__ import annotations

from pathlib import Path

import pytest

from reviewapp import constants as c
from reviewapp.models import Comparison, ComparisonResult, Verdict
from reviewapp.services import UploadRejected
from reviewapp.services.series import series_create_from_mail
from reviewapp.services.verdicts import trailer_lines, verdict_set

pytestmark = pytest.mark.django_db
MBOX = Path(__file__).resolve().parents[2] / "data" / "mbox"


@pytest.fixture
def series(user):
    return series_create_from_mail(data=(MBOX / "series_split_head_v1.mbox").read_bytes(),
                                   user=user)


def test_verdict_form_shown_and_exported_with_report(logged_in_client, user, other_user,
                                                     series):
    """Tested-by from the patch page; Reviewed-by by another user; trailers.txt has both
    lines (Name <email>) and the newest finished comparison's report."""
    user.first_name, user.last_name, user.email = "Coly", "Li", "colyli@example.org"
    user.save()
    patch = series.patches.get(position=2)
    resp = logged_in_client.post(f"/patches/{patch.pk}/verdicts/",
                                 {"kind": c.VERDICT_TESTED, "message": "md raid5 reads"})
    assert resp.status_code == 302
    verdict_set(user=other_user, patch=patch, kind=c.VERDICT_REVIEWED)
    cmp = Comparison.objects.create(patch=patch, created_by=user, status=c.COMPARISON_READY)
    ComparisonResult.objects.create(comparison=cmp, state=c.JOB_STATE_SUCCEEDED,
                                    report="blkreview report\nbackward dispatches: 50% -> 0%\n")
    html = logged_in_client.get(f"/patches/{patch.pk}/").content.decode()
    assert "Tested-by</strong> Coly Li: md raid5 reads" in html
    text = logged_in_client.get(f"/patches/{patch.pk}/trailers.txt").content.decode()
    assert text.splitlines()[:2] == [f"Reviewed-by: {other_user.username} <{other_user.email}>"
                                     if other_user.email else
                                     f"Reviewed-by: {other_user.username}",
                                     "Tested-by: Coly Li <colyli@example.org>"]
    assert "backward dispatches: 50% -> 0%" in text
    series_text = logged_in_client.get(f"/series/{series.pk}/trailers.txt").content.decode()
    assert "Tested-by: Coly Li <colyli@example.org>" in series_text
    assert "backward dispatches" in series_text


def test_series_verdict_and_update_not_duplicate(logged_in_client, user, series):
    """A series-level Acked-by; the same verdict twice updates the message."""
    logged_in_client.post(f"/series/{series.pk}/verdicts/", {"kind": c.VERDICT_ACKED})
    logged_in_client.post(f"/series/{series.pk}/verdicts/", {"kind": c.VERDICT_ACKED,
                                                             "message": "for the series"})
    v = Verdict.objects.get(series=series)
    assert v.message == "for the series"
    assert "Acked-by" in logged_in_client.get(f"/series/{series.pk}/").content.decode()
    assert trailer_lines([v]) == [f"Acked-by: {user.username}" + (
        f" <{user.email}>" if user.email else "")]
    with pytest.raises(UploadRejected):
        verdict_set(user=user, series=series, kind="liked-by")


def test_private_patch_verdicts_404(client, other_user, password, user):
    """Verdicts and trailers of a private patch are 404 to others."""
    s = series_create_from_mail(data=(MBOX / "series_split_head_v2.mbox").read_bytes(),
                                user=user, public=False)
    p = s.patches.first()
    client.login(username=other_user.username, password=password)
    assert client.post(f"/patches/{p.pk}/verdicts/", {"kind": "tested-by"}).status_code == 404
    assert client.get(f"/patches/{p.pk}/trailers.txt").status_code == 404
    assert client.get(f"/series/{s.pk}/trailers.txt").status_code == 404
