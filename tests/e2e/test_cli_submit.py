"""``blkreview submit`` (``python -m workers submit``) against a live server and a real worker:
uploads both sides over REST with the token from the environment, waits for the check, prints
the summary and exits by the check's state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import blkparse_lines

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
EXIT = {"success": 0, "warning": 0, "fail": 1, "error": 3}


def submit(*args: str, token: str | None, url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "BLKREVIEW_TOKEN"}
    env["PYTHONPATH"] = str(ROOT)
    if token is not None:
        env["BLKREVIEW_TOKEN"] = token
    return subprocess.run([sys.executable, "-m", "workers", "submit", "--url", url, "--poll",
                           "0.5", "--timeout", "180", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=240, stdin=subprocess.DEVNULL)


def test_submit_uploads_waits_and_exits_by_the_check(celery_worker, live_server, user,
                                                     tmp_path):
    """Exit code follows the check (success/warning 0, fail 1); --json carries both."""
    from reviewapp.models import Comparison
    from reviewapp.services.tokens import token_create

    _, key = token_create(user=user, name="ci-bot")
    (tmp_path / "before.txt").write_bytes(blkparse_lines([256 * k for k in range(50)]))
    (tmp_path / "after.txt").write_bytes(blkparse_lines([7 + 384 * k for k in range(50)]))
    r = submit("--title", "block: cli submit", "--version", "v3", "--json",
               str(tmp_path / "before.txt"), "--", str(tmp_path / "after.txt"),
               token=key, url=live_server.url)
    assert r.returncode in (0, 1, 3), r.stderr
    out = json.loads(r.stdout)
    state = out["check"]["state"]
    assert state in EXIT and r.returncode == EXIT[state], (state, r.returncode, r.stderr)
    comparison = Comparison.objects.get(pk=out["submission"]["id"])
    assert comparison.patch.title == "block: cli submit" and comparison.patch.version == "v3"
    assert [f.name for b in comparison.baseline_bundles.all() for f in b.files.all()] == [
        "before.txt"]

    text = submit("--title", "block: cli submit", str(tmp_path / "before.txt"), "--",
                  str(tmp_path / "after.txt"), token=key, url=live_server.url)
    assert text.returncode == r.returncode
    assert f"check: {state}" in text.stdout and "/comparisons/" in text.stdout
    assert text.stderr == ""  # not a terminal: no progress


def test_submit_needs_a_token_and_reports_a_bad_one(live_server, user, tmp_path):
    """No token: usage error naming the variable; a wrong token: the server's 401/403; a
    rejected upload: the server's reason."""
    from reviewapp.services.tokens import token_create

    _, key = token_create(user=user, name="ci-bot")
    (tmp_path / "a.txt").write_bytes(blkparse_lines([0, 256]))
    r = submit(str(tmp_path / "a.txt"), "--", str(tmp_path / "a.txt"), token=None,
               url=live_server.url)
    assert r.returncode == 2 and "BLKREVIEW_TOKEN" in r.stderr
    r = submit(str(tmp_path / "a.txt"), "--", str(tmp_path / "a.txt"), token="not-a-token",
               url=live_server.url)
    assert r.returncode == 2 and ("HTTP 401" in r.stderr or "HTTP 403" in r.stderr), r.stderr
    r = submit(str(tmp_path / "a.txt"), token="x", url=live_server.url)
    assert r.returncode == 2 and "--" in r.stderr
    r = submit(str(tmp_path / "a.txt"), "--", str(tmp_path / "a.txt"), token=key,
               url=live_server.url)  # the server's readable 400: a title is required
    assert r.returncode == 2 and "HTTP 400" in r.stderr and "title" in r.stderr
