"""Threads: anchors (chart region, metric row, diff line), replies, edit history, tombstones,
resolve/reopen rights, unresolved counts, mentions and notification mail text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core import mail

from reviewapp import constants as c
from reviewapp.models import Comparison, Event, NotificationSetting
from reviewapp.selectors import patch_unresolved, series_unresolved, thread_list, unresolved_count
from reviewapp.services import NotAllowed, UploadRejected
from reviewapp.services.notifications import notification_recipients, notification_send
from reviewapp.services.results import charts_replace
from reviewapp.services.series import series_create_from_mail
from reviewapp.services.threads import (
    comment_create,
    comment_delete,
    comment_edit,
    thread_create,
    thread_set_resolved,
)

pytestmark = pytest.mark.django_db

MBOX = Path(__file__).resolve().parents[2] / "data" / "mbox"
SEEK_TABLE = {"id": "seek", "title": "Seek (D stage)",
              "columns": ["", "Baseline", "Patched", "Δ", "Δ %", "Verdict", "lkp range rule"],
              "rows": [["Zero-seek share (%)", "50.0", "100.0", "+50.0", "+100.0%",
                        "single run", None]]}


@pytest.fixture
def comparison(user):
    s = series_create_from_mail(data=(MBOX / "series_split_head_v1.mbox").read_bytes(), user=user)
    cmp = Comparison.objects.create(patch=s.patches.get(position=2), created_by=user,
                                    status=c.COMPARISON_READY)
    charts_replace(comparison_id=cmp.pk,
                   charts={("seek", "8,16", "D"): json.dumps({"tables": [SEEK_TABLE]})})
    return cmp


def test_metric_row_anchor_takes_the_numbers_the_page_shows(comparison, user):
    """A metric-row thread stores the row's numbers from the stored section payload."""
    t = thread_create(user=user, comparison=comparison, anchor_kind=c.ANCHOR_METRIC,
                      anchor={"section": "seek", "dev": "8,16", "stage": "D",
                              "metric": "Zero-seek share (%)"}, body="why 100%?")
    assert t.anchor_label == "8,16 at D, Zero-seek share (%)"
    assert t.anchor_numbers["baseline"] == "50.0" and t.anchor_numbers["pct"] == "+100.0%"
    assert Event.objects.filter(kind=c.EVENT_THREAD_CREATED, comparison=comparison).exists()
    with pytest.raises(UploadRejected, match="no metric 'IOPS'"):
        thread_create(user=user, comparison=comparison, anchor_kind=c.ANCHOR_METRIC,
                      anchor={"section": "seek", "dev": "8,16", "metric": "IOPS"}, body="x")


def test_chart_anchor_bucket_or_window_validated(comparison, user):
    """Chart regions need section + device + (bucket or window); values are sanitized."""
    t = thread_create(user=user, comparison=comparison, anchor_kind=c.ANCHOR_CHART,
                      anchor={"section": "seek", "dev": "8,16", "stage": "d", "chart": "seek",
                              "side": "patched", "bucket": "[1024, 2048)",
                              "values": {"baseline": 12, "patched": 3.5, "evil": {"x": 1},
                                         "<script>": 1, "nan": float("nan")}},
                      body="this bucket")
    assert t.anchor == {"section": "seek", "dev": "8,16", "stage": "D", "chart": "seek",
                        "side": "patched", "bucket": "[1024, 2048)"}
    assert t.anchor_numbers == {"baseline": 12.0, "patched": 3.5}
    w = thread_create(user=user, comparison=comparison, anchor_kind=c.ANCHOR_CHART,
                      anchor={"section": "throughput", "dev": "8,16", "x0": 1.5, "x1": 2},
                      body="this window")
    assert "window 1.5..2" in w.anchor_label
    # its link zooms around the window (half its width either side, not below 0); the page
    # shades x0..x1 itself (tests/e2e/test_browser_threads.py)
    from reviewapp.templatetags.collab_extras import anchor_href

    assert anchor_href(w).endswith("section=throughput&x=1.25,2.25")
    w.anchor = {**w.anchor, "x0": 0.1, "x1": 0.5}
    assert anchor_href(w).endswith("&x=0,0.7")
    for bad, why in [({"section": "seek", "dev": "8,16"}, "bucket or a window"),
                     ({"section": "nope", "dev": "8,16", "bucket": "1"}, "unknown section"),
                     ({"section": "seek", "dev": "<b>", "bucket": "1"}, "characters"),
                     ({"section": "seek", "dev": "8,16", "x0": 3, "x1": 1}, "not a window")]:
        with pytest.raises(UploadRejected, match=why):
            thread_create(user=user, comparison=comparison, anchor_kind=c.ANCHOR_CHART,
                          anchor=bad, body="x")


def test_diff_line_anchor(comparison, user):
    """A diff-line thread names the file and the new-file line number."""
    patch = comparison.patch
    t = thread_create(user=user, patch=patch, anchor_kind=c.ANCHOR_DIFF, anchor={"line": 12},
                      body="why nocheck?")
    assert t.anchor == {"line": 12, "file": "block/blk-merge.c"}
    assert t.anchor_label == "block/blk-merge.c:133 (diff line 12)"
    assert t.anchor_numbers["text"] == "+\t/* keep the remainder ahead of bios queued later by the same task */"
    with pytest.raises(UploadRejected, match="no line 999"):
        thread_create(user=user, patch=patch, anchor_kind=c.ANCHOR_DIFF, anchor={"line": 999},
                      body="x")


def test_reply_edit_history_delete_tombstone(comparison, user, other_user):
    """Edit keeps the earlier body and marks edited; delete leaves a tombstone; only the
    author may do either."""
    t = thread_create(user=user, comparison=comparison, body="first")
    reply = comment_create(user=other_user, thread=t, body="reply")
    with pytest.raises(NotAllowed):
        comment_edit(comment=reply, user=user, body="hijack")
    comment_edit(comment=reply, user=other_user, body="reply, corrected")
    reply.refresh_from_db()
    assert reply.edited is not None and reply.body == "reply, corrected"
    assert list(reply.revisions.values_list("body", flat=True)) == ["reply"]
    comment_delete(comment=reply, user=other_user)
    reply.refresh_from_db()
    assert reply.deleted is not None and reply.body == "" and not reply.revisions.exists()
    with pytest.raises(UploadRejected, match="deleted"):
        comment_edit(comment=reply, user=other_user, body="again")
    assert [cm.pk for cm in thread_list(comparison=comparison)[0].comments.all()] == [
        t.comments.first().pk, reply.pk]


def test_resolve_rights_and_unresolved_counts(comparison, user, other_user):
    """Starter/owner resolve and reopen; others may not; counts on comparison, patch, series."""
    patch = comparison.patch
    t1 = thread_create(user=other_user, comparison=comparison, body="a")
    thread_create(user=user, patch=patch, anchor_kind=c.ANCHOR_DIFF, anchor={"line": 3},
                  body="b")
    assert unresolved_count(comparisons=[comparison]) == 1
    assert patch_unresolved(patch, user) == 2 and series_unresolved(patch.series, user) == 2
    thread_set_resolved(thread=t1, user=user, resolved=True)  # the comparison's owner
    assert patch_unresolved(patch, user) == 1
    t2 = thread_create(user=user, comparison=comparison, body="c")
    with pytest.raises(NotAllowed):
        thread_set_resolved(thread=t2, user=other_user, resolved=True)
    thread_set_resolved(thread=t1, user=other_user, resolved=False)  # the starter
    assert unresolved_count(comparisons=[comparison]) == 2
    kinds = list(Event.objects.filter(comparison=comparison).values_list("kind", flat=True))
    assert c.EVENT_THREAD_RESOLVED in kinds and c.EVENT_THREAD_REOPENED in kinds


def test_notification_recipients_and_text(comparison, user, other_user, django_user_model):
    """Participants and @mentioned users get mail with the anchor's numbers; the author,
    opted-out users and users without access do not."""
    django_user_model.objects.create_user("carol", "carol@example.org", "pw-carol-123")
    dave = django_user_model.objects.create_user("dave", "dave@example.org", "pw-dave-1234")
    t = thread_create(user=user, comparison=comparison, anchor_kind=c.ANCHOR_METRIC,
                      anchor={"section": "seek", "dev": "8,16", "stage": "D",
                              "metric": "Zero-seek share (%)"}, body="look")
    reply = comment_create(user=other_user, thread=t, body="@carol @dave see this")
    NotificationSetting.objects.create(user=dave, mail=False)
    names = sorted(u.username for u in notification_recipients(reply))
    assert names == ["carol", user.username]
    mail.outbox.clear()
    assert notification_send(comment_id=reply.pk) == 2
    msg = mail.outbox[0]
    assert "[blkreview]" in msg.subject
    assert "On: 8,16 at D, Zero-seek share (%)" in msg.body
    assert "baseline 50.0 -> patched 100.0 (+100.0%), single run" in msg.body
    assert f"/threads/{t.pk}/" in msg.body
    comparison.public = False
    comparison.save()
    assert [u.username for u in notification_recipients(reply)] == [user.username]
