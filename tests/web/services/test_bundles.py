"""bundle_create: streaming to storage, checksums, shared stored bytes, generated names,
rejections."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from django.core.files.storage import default_storage

from reviewapp.models import AnalysisJob, TraceBundle, TraceFile
from reviewapp.services import UploadRejected, UploadTooLargeError
from reviewapp.services.bundles import bundle_checksum, bundle_create

pytestmark = pytest.mark.django_db


def test_bundle_create_stores_files_under_generated_names(make_upload, seed000_before, user):
    """The bytes land in storage under traces/<uuid>, never under the client's path."""
    bundle, created = bundle_create(
        files=[make_upload("../../etc/evil/before.txt", seed000_before)], role="baseline",
        kernel="6.17.13", user=user)
    assert created
    f = bundle.files.get()
    assert f.name == "before.txt"
    assert f.storage_name.startswith("traces/") and "evil" not in f.storage_name
    assert f.format == "blkparse"
    with default_storage.open(f.storage_name, "rb") as fh:
        assert fh.read() == seed000_before
    assert f.checksum == hashlib.sha256(seed000_before).hexdigest()
    assert f.size == len(seed000_before) == bundle.size
    assert bundle.checksum == bundle_checksum([f.checksum])
    assert bundle.uploaded_by == user and bundle.kernel == "6.17.13"


def test_bundle_create_same_bytes_is_a_new_bundle_sharing_the_stored_bytes(
        make_upload, seed000_before, user, other_user):
    """Issue 10 §4: the same bytes uploaded by another user are another bundle with that
    user's metadata; the bytes are stored once (shared by both TraceFiles)."""
    first, _ = bundle_create(files=[make_upload("a.txt", seed000_before)], kernel="6.1-mine",
                             user=user)
    second, created = bundle_create(files=[make_upload("renamed.txt", seed000_before)],
                                    kernel="6.9-theirs", user=other_user)
    assert created and first.pk != second.pk
    assert (first.kernel, first.uploaded_by) == ("6.1-mine", user)
    assert (second.kernel, second.uploaded_by) == ("6.9-theirs", other_user)
    assert [f.name for f in second.files.all()] == ["renamed.txt"]
    assert TraceFile.objects.count() == 2
    names = set(TraceFile.objects.values_list("storage_name", flat=True))
    assert len(names) == 1
    stored = [n for n in default_storage.listdir("traces")[1] if f"traces/{n}" in names]
    assert len(stored) == 1
    # each bundle is analyzed on its own
    assert AnalysisJob.objects.filter(bundle=second).count() == 1


def test_deleting_a_bundle_keeps_the_bytes_another_uses(make_upload, seed000_before, user,
                                                        other_user):
    """Issue 10 §4: deleting one bundle leaves the stored blob the other bundle reads."""
    first, _ = bundle_create(files=[make_upload("a.txt", seed000_before)], user=user)
    second, _ = bundle_create(files=[make_upload("b.txt", seed000_before)], user=other_user)
    name = second.files.get().storage_name
    first.delete()
    with default_storage.open(name, "rb") as fh:
        assert fh.read() == seed000_before


def test_bundle_checksum_ignores_order_and_names(make_upload, seed000_before, seed000_after):
    """Two files uploaded in the other order have the same checksum (two bundles)."""
    a, _ = bundle_create(files=[make_upload("x", seed000_before), make_upload("y", seed000_after)])
    b, created = bundle_create(files=[make_upload("q", seed000_after),
                                      make_upload("r", seed000_before)])
    assert created and a.pk != b.pk and a.checksum == b.checksum


def test_bundle_create_shares_stored_file_between_bundles(make_upload, seed000_before,
                                                          seed000_after):
    """A file already stored for another bundle is not stored twice."""
    a, _ = bundle_create(files=[make_upload("x", seed000_before)])
    b, _ = bundle_create(files=[make_upload("x", seed000_before), make_upload("y", seed000_after)])
    assert a.pk != b.pk
    shared = b.files.get(name="x")
    assert shared.storage_name == a.files.get().storage_name


def test_bundle_create_queues_one_job(make_upload, seed000_before, django_capture_on_commit_callbacks,
                                      monkeypatch, settings):
    """A new bundle gets an AnalysisJob that is published only after the commit."""
    sent = []
    from workers.celery import app

    # ignore_result: with the chord's result backend on, a send must not subscribe the web
    # process to a result channel (reviewapp/services/jobs.py)
    monkeypatch.setattr(app, "send_task",
                        lambda name, args, task_id, queue, ignore_result: sent.append(
                            (name, args, task_id, queue, ignore_result)))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        bundle, _ = bundle_create(files=[make_upload("a", seed000_before)])
        assert sent == []
    job = AnalysisJob.objects.get(bundle=bundle)
    assert job.state == "queued" and job.progress == 0
    for cb in callbacks:
        cb()
    assert sent == [("reviewapp.tasks.analyze_bundle", [job.pk], job.celery_task_id,
                     settings.BLKREVIEW_ANALYSIS_QUEUE, True)]


def test_bundle_create_rejects_empty_upload():
    """No files at all is a clear error."""
    with pytest.raises(UploadRejected, match="no files"):
        bundle_create(files=[], side_label="baseline")


def test_bundle_create_rejects_empty_file(make_upload):
    """A side whose only file is zero bytes is refused, naming the file."""
    with pytest.raises(UploadRejected, match=r"the file is empty \(empty.txt\)"):
        bundle_create(files=[make_upload("empty.txt", b"")])


def test_bundle_create_rejects_all_empty_files(make_upload):
    """Several files, all empty: refused, naming them."""
    with pytest.raises(UploadRejected, match=r"every file is empty \(sda.blktrace.0, sda"):
        bundle_create(files=[make_upload("sda.blktrace.0", b""),
                             make_upload("sda.blktrace.1", b"")], side_label="baseline")


def test_bundle_create_accepts_idle_cpu_file_and_analysis_skips_it(make_upload, user):
    """An empty per-CPU .blktrace.N beside a non-empty one is stored; ingest skips it."""
    from reviewapp.models import BundleResult
    from reviewapp.tasks import run_analysis

    demo = Path(__file__).resolve().parents[3] / "reviewapp" / "demo" / "k61_W1b"
    data = (demo / "vda.blktrace.0").read_bytes()
    bundle, created = bundle_create(
        files=[make_upload("vda.blktrace.0", data), make_upload("vda.blktrace.1", b"")],
        role="baseline", user=user)
    assert created
    formats = dict(bundle.files.values_list("name", "format"))
    assert formats == {"vda.blktrace.0": "blktrace", "vda.blktrace.1": "empty"}
    job = AnalysisJob.objects.get(bundle=bundle)
    assert run_analysis(job.pk) == "succeeded"
    result = BundleResult.objects.get(bundle=bundle)
    assert result.data["devices"]["254,0"]["stage"] == "D"
    assert any("vda.blktrace.1: empty file skipped" in w
               for w in (result.ingest or {}).get("warnings", [])), result.ingest


def test_bundle_create_rejects_unknown_format(make_upload):
    """A file that is no known trace is refused before anything is stored."""
    with pytest.raises(UploadRejected, match="notes.txt.*not a recognised"):
        bundle_create(files=[make_upload("notes.txt", b"hello, this is not a trace\n")])
    assert not TraceFile.objects.exists()


def test_bundle_create_rejects_over_limit(make_upload, settings, seed000_before):
    """A bundle over BLKREVIEW_MAX_UPLOAD_MB is refused with status 413."""
    settings.BLKREVIEW_MAX_UPLOAD_BYTES = len(seed000_before) - 1
    with pytest.raises(UploadTooLargeError) as exc:
        bundle_create(files=[make_upload("big.txt", seed000_before)])
    assert exc.value.status == 413
    assert not TraceBundle.objects.exists()


def test_bundle_create_limit_is_enforced_while_streaming(make_upload, settings, seed000_before):
    """A file that claims a small size but streams more is cut off and removed from storage."""
    settings.BLKREVIEW_MAX_UPLOAD_BYTES = 100
    up = make_upload("liar.txt", seed000_before)
    up.size = 10
    before = set(default_storage.listdir("traces")[1]) if default_storage.exists("traces") else set()
    with pytest.raises(UploadTooLargeError):
        bundle_create(files=[up])
    after = set(default_storage.listdir("traces")[1]) if default_storage.exists("traces") else set()
    assert after == before
