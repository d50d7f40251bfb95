"""A real Celery worker process sends the collaboration side effects: notification mail (to
participants and @mentioned users, with the anchor's numbers, honouring the opt-out) and
webhook deliveries (HMAC-SHA256 signed, a failed attempt retried with backoff, logged)."""

from __future__ import annotations

import hashlib
import hmac
import http.server
import json
import os
import threading
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
MBOX = Path(__file__).resolve().parents[1] / "data" / "mbox"


def wait_for(test, timeout: float = 90.0, what: str = ""):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        value = test()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def mails() -> list[str]:
    """Every message the worker's file email backend wrote (a file may hold several, each
    followed by a line of 79 dashes)."""
    d = Path(os.environ["EMAIL_FILE_PATH"])
    out: list[str] = []
    for p in sorted(d.glob("*.log")) if d.exists() else []:
        out += [m for m in p.read_text(errors="replace").split("-" * 79 + "\n") if m.strip()]
    return out


def test_worker_mails_participants_and_mentions(celery_worker, user, django_user_model):
    """A reply mentioning @carol: the worker mails the thread's starter and carol (not the
    author, not dave who opted out), with the metric row's numbers in the text."""
    from reviewapp import constants as c
    from reviewapp.models import Comparison, NotificationSetting
    from reviewapp.services.results import charts_replace
    from reviewapp.services.series import series_create_from_mail
    from reviewapp.services.threads import comment_create, thread_create

    user.email = "maintainer@example.org"
    user.save()
    bob = django_user_model.objects.create_user("bob", "bob@example.org", "pw-bob-12345")
    django_user_model.objects.create_user("carol", "carol@example.org", "pw-carol-12345")
    dave = django_user_model.objects.create_user("dave", "dave@example.org", "pw-dave-12345")
    NotificationSetting.objects.create(user=dave, mail=False)
    s = series_create_from_mail(data=(MBOX / "series_split_head_v1.mbox").read_bytes(),
                                user=user)
    cmp = Comparison.objects.create(patch=s.patches.get(position=2), created_by=user,
                                    status=c.COMPARISON_READY)
    table = {"title": "Seek (D stage)", "columns": ["", "Baseline", "Patched", "Δ", "Δ %",
                                                      "Verdict"],
             "rows": [["Zero-seek share (%)", "50.0", "100.0", "+50.0", "+100.0%", "improved"]]}
    charts_replace(comparison_id=cmp.pk,
                   charts={("seek", "8,16", "D"): json.dumps({"tables": [table]})})
    before = len(mails())
    t = thread_create(user=user, comparison=cmp, anchor_kind=c.ANCHOR_METRIC,
                      anchor={"section": "seek", "dev": "8,16", "stage": "D",
                              "metric": "Zero-seek share (%)"}, body="Doubled zero seeks.")
    comment_create(user=bob, thread=t, body="@carol @dave please confirm on your raid5")
    got = wait_for(lambda: len(mails()) >= before + 2 and mails()[before:], what="two mails")
    time.sleep(2)  # anything else (a third mail) would have arrived by now
    new = mails()[before:]
    to = sorted(line.split(": ", 1)[1] for m in new for line in m.splitlines()
                if line.startswith("To: "))
    assert to == ["carol@example.org", "maintainer@example.org"], got
    text = new[0]
    assert "On: 8,16 at D, Zero-seek share (%)" in text
    assert "baseline 50.0 -> patched 100.0 (+100.0%), improved" in text
    assert "@carol @dave please confirm" in text and f"/threads/{t.pk}/" in text


class Receiver(http.server.BaseHTTPRequestHandler):
    """Answers 500 to the first POST, then 200; records every request."""

    seen: list[dict] = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Receiver.seen.append({"headers": dict(self.headers), "body": body})
        self.send_response(500 if len(Receiver.seen) == 1 else 200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_worker_delivers_signed_webhook_with_retry(celery_worker, user):
    """series-created is POSTed to a loopback server; the first attempt gets 500 and is
    retried after the backoff; the body verifies against the secret; the log says 2 attempts."""
    from reviewapp import constants as c
    from reviewapp.models import WebhookDelivery
    from reviewapp.services.series import series_create_from_mail
    from reviewapp.services.webhooks import webhook_create

    Receiver.seen = []
    server = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        hook = webhook_create(user=user, url=f"http://127.0.0.1:{server.server_port}/hook",
                              events=[c.EVENT_SERIES_CREATED])
        s = series_create_from_mail(data=(MBOX / "series_split_head_v2.mbox").read_bytes(),
                                    user=user)
        wait_for(lambda: WebhookDelivery.objects.filter(
            webhook=hook, state=c.WEBHOOK_DELIVERY_SUCCEEDED).exists(), what="delivery")
    finally:
        server.shutdown()
    d = WebhookDelivery.objects.get(webhook=hook)
    assert (d.attempts, d.response_status) == (2, 200)
    assert len(Receiver.seen) == 2
    req = Receiver.seen[-1]
    sig = req["headers"]["X-Blkreview-Signature"]
    expected = "sha256=" + hmac.new(hook.secret.encode(), req["body"], hashlib.sha256).hexdigest()
    assert hmac.compare_digest(sig, expected)
    payload = json.loads(req["body"])
    assert payload["kind"] == "series-created" and payload["series"] == s.pk
    assert req["headers"]["X-Blkreview-Event"] == "series-created"
