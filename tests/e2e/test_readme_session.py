"""The README's "A CI bot's whole session" runs as written (issue 8, README: create a series
from an mbox, upload two bundles, create a comparison, poll, post and read a check, register a
webhook): the shell block is taken from README.md and run by bash with curl and jq against a
live server and a real Celery worker, then the database is checked for what each step made.
A README edit that breaks a field name, a jq path or a route fails here."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.conftest import blkparse_lines

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
MBOX = ROOT / "tests" / "data" / "mbox"


def readme_session() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## A CI bot's whole session"):]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "README: the CI-bot session has no sh block"
    return block.group(1)


def _tar_zst(path: Path, name: str, data: bytes, work: Path) -> None:
    (work / name).write_bytes(data)
    plain = work / (path.name + ".tar")
    with tarfile.open(plain, "w") as tar:
        tar.add(work / name, arcname=name)
    subprocess.run(["zstd", "-q", "-f", str(plain), "-o", str(path)], check=True)


@pytest.mark.skipif(not all(shutil.which(t) for t in ("bash", "curl", "jq", "zstd")),
                    reason="needs bash, curl, jq and zstd")
def test_the_readme_ci_bot_session_runs_as_written(celery_worker, live_server, user, tmp_path):
    from reviewapp.models import Check, Comparison, Series, Webhook
    from reviewapp.services.series import series_create_from_mail
    from reviewapp.services.tokens import token_create

    v1 = series_create_from_mail(data=(MBOX / "series_split_head_v1.mbox").read_bytes(),
                                 user=user)
    shutil.copy(MBOX / "series_split_head_v2.mbox", tmp_path / "v2.mbox")
    work = tmp_path / "parts"
    work.mkdir()
    _tar_zst(tmp_path / "base.tar.zst", "before.blkparse.txt",
             blkparse_lines([256 * k for k in range(60)]), work)
    _tar_zst(tmp_path / "patched.tar.zst", "after.blkparse.txt",
             blkparse_lines([7 + 384 * k for k in range(60)]), work)
    _, key = token_create(user=user, name="ci-bot")

    script = ("set -eo pipefail\n" + readme_session()
              + 'echo "SESSION sid=$sid patch=$patch base=$base new=$new state=$state"\n')
    env = {**os.environ, "URL": live_server.url, "TOKEN": key,
           "CI_JOB_URL": "https://ci.example.org/jobs/42"}
    r = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    got = dict(re.findall(r"(\w+)=(\S*)", r.stdout.splitlines()[-1]))

    # 1. the series from the mbox, linked to v1 (same stem and author)
    v2 = Series.objects.get(pk=int(got["sid"]))
    assert v2.version == 2 and v2.previous_id == v1.pk
    patch = v2.patches.get(position=2)
    assert int(got["patch"]) == patch.pk
    # 2.-4. two bundles, the comparison on that patch, polled until its step finished
    comparison = Comparison.objects.get(patch=patch)
    assert [b.pk for b in comparison.baseline_bundles.all()] == [int(got["base"])]
    assert [b.pk for b in comparison.patched_bundles.all()] == [int(got["new"])]
    assert comparison.baseline_bundles.get().files.get().name == "base.tar.zst"
    assert got["state"] in ("success", "warning", "fail", "error")
    assert comparison.result.verdict["state"] == got["state"] or got["state"] == "error"
    # 5. our check posted with the mapped state, and the roll-up read back (jq printed it)
    posted = Check.objects.get(patch=patch, context="ci-md-raid5")
    assert posted.state == ("fail" if got["state"] == "error" else got["state"])
    assert posted.target_url == "https://ci.example.org/jobs/42"
    assert '"context": "ci-md-raid5"' in r.stdout
    assert '"context": "blkreview-comparison"' in r.stdout  # the comparison's own check
    # 6. the webhook, its secret shown once and saved by the script
    hook = Webhook.objects.get(user=user)
    assert sorted(hook.events) == ["check-created", "series-created"]
    assert (tmp_path / "hook-secret").read_text().strip() == hook.secret


@pytest.mark.skipif(not all(shutil.which(t) for t in ("bash", "curl", "jq", "zstd")),
                    reason="needs bash, curl, jq and zstd")
def test_the_api_docs_ci_bot_runs_as_written(celery_worker, live_server, user, tmp_path):
    """docs/api.md "A CI bot, start to finish": one submission, poll, report; the last line
    passes (exit 0) exactly on success/warning. (It once compared with pass/warn, names the
    check never has, so every bot run failed.)"""
    from reviewapp.models import Comparison
    from reviewapp.services.tokens import token_create

    text = (ROOT / "docs" / "api.md").read_text()
    section = text[text.index("## A CI bot, start to finish"):]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block
    work = tmp_path / "parts"
    work.mkdir()
    _tar_zst(tmp_path / "base.tar.zst", "before.blkparse.txt",
             blkparse_lines([256 * k for k in range(60)]), work)
    _tar_zst(tmp_path / "patched.tar.zst", "after.blkparse.txt",
             blkparse_lines([7 + 384 * k for k in range(60)]), work)
    _, key = token_create(user=user, name="ci-bot")
    script = block.group(1).replace("http://review.example.org", live_server.url)
    env = {**os.environ, "TOKEN": key, "SUBJECT": "block: the api.md bot"}
    r = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300, stdin=subprocess.DEVNULL)
    comparison = Comparison.objects.get(patch__title="block: the api.md bot")
    state = comparison.result.verdict["state"]
    assert r.stdout.splitlines()[0] == state, r.stdout
    assert r.returncode == (0 if state in ("success", "warning") else 1), (r.stdout, r.stderr)
    assert f"Check: {state.upper()}" in (tmp_path / "report.txt").read_text()
    assert f"/comparisons/{comparison.pk}/" in r.stdout
