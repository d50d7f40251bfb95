"""comparison_create / add bundles / submission, policy names, status, comments, tokens."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from reviewapp.models import AnalysisJob, Comparison, Patch
from reviewapp.services import NotAllowed, UploadRejected
from reviewapp.services.bundles import bundle_create
from reviewapp.services.comparisons import (
    clean_policy,
    comparison_add_bundles,
    comparison_create,
    submission_create,
)
from reviewapp.services.jobs import comparison_refresh_status
from reviewapp.services.threads import comment_create
from reviewapp.services.tokens import TokenRejected, token_authenticate, token_create, token_revoke
from reviewapp.tasks import run_analysis
from tests.conftest import past_head

pytestmark = pytest.mark.django_db


def test_clean_policy_accepts_section7_names():
    """Known fields pass (normalized, every engine field incl. unplug_trace); unknown fields
    (section 7 has one spelling: not architecture.md's split_to) and values outside the choices
    are refused."""
    assert clean_policy(" split_remainder = head , bio_build=align:262144") == \
        "split_remainder=head,bio_build=align:262144"
    assert clean_policy("tag_preempt") == "tag_preempt"
    assert clean_policy("unplug_trace=not_direct,dio_bio_limit=pages") == \
        "unplug_trace=not_direct,dio_bio_limit=pages"
    assert clean_policy("") == ""
    with pytest.raises(UploadRejected, match="unknown field 'split_to'"):
        clean_policy("split_to=head")
    with pytest.raises(UploadRejected, match="split_remainder='sideways'"):
        clean_policy("split_remainder=sideways")


def test_comparison_status_follows_jobs(make_upload, seed000_before, seed000_after, user):
    """pending -> ready when both bundles have results; failed when one fails."""
    b, _ = bundle_create(files=[make_upload("b", seed000_before)])
    p, _ = bundle_create(files=[make_upload("p", seed000_after)])
    patch = Patch.objects.create(title="t")
    cmp_ = comparison_create(patch=patch, baseline=[b], patched=[p], user=user)
    assert cmp_.status == "pending" and cmp_.threads.count() == 1
    for job in AnalysisJob.objects.all():
        run_analysis(job.pk)
    cmp_.refresh_from_db()
    assert cmp_.status == "ready"
    bad, _ = bundle_create(files=[make_upload("x", past_head(seed000_before) + b"8,0 0 1 1 1 G R q + 8 [d]\n")])
    comparison_add_bundles(comparison=cmp_, side="patched", bundles=[bad])
    run_analysis(AnalysisJob.objects.get(bundle=bad).pk)
    cmp_.refresh_from_db()
    assert cmp_.status == "failed"
    assert comparison_refresh_status(comparison=cmp_) == "failed"


def test_reused_bundle_is_not_analyzed_twice(make_upload, seed000_before, seed000_after):
    """A bundle with results that joins another comparison gets no new job."""
    b, _ = bundle_create(files=[make_upload("b", seed000_before)])
    p, _ = bundle_create(files=[make_upload("p", seed000_after)])
    for job in AnalysisJob.objects.all():
        run_analysis(job.pk)
    patch = Patch.objects.create(title="t")
    comparison_create(patch=patch, baseline=[b], patched=[p])
    assert AnalysisJob.objects.count() == 2


def test_comparison_needs_both_sides(make_upload, seed000_before):
    """A comparison without a baseline or patched bundle is refused."""
    b, _ = bundle_create(files=[make_upload("b", seed000_before)])
    patch = Patch.objects.create(title="t")
    with pytest.raises(UploadRejected, match="patched"):
        comparison_create(patch=patch, baseline=[b], patched=[])
    with pytest.raises(UploadRejected, match="side must be"):
        comparison_add_bundles(comparison=comparison_create(patch=patch, baseline=[b],
                                                            patched=[b]),
                               side="middle", bundles=[b])


def test_submission_validates_both_sides_before_storing(make_upload, seed000_before):
    """A bad patched side leaves no baseline bundle behind."""
    with pytest.raises(UploadRejected, match="junk.bin"):
        submission_create(title="t", baseline_files=[make_upload("b", seed000_before)],
                          patched_files=[make_upload("junk.bin", b"\x00\x00junk")])
    assert not Comparison.objects.exists()
    from reviewapp.models import TraceBundle

    assert not TraceBundle.objects.exists()


def test_submission_from_archive_per_side(make_upload, seed000_before, seed000_after, tmp_path):
    """One .tar.gz per side is accepted and unpacked by the worker's ingest."""
    import io
    import tarfile

    def targz(name: str, data: bytes) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        return buf.getvalue()

    cmp_, bundles = submission_create(
        title="t", baseline_files=[SimpleUploadedFile("base.tar.gz", targz("g.txt", seed000_before))],
        patched_files=[SimpleUploadedFile("patched.tar.gz", targz("g.txt", seed000_after))])
    assert bundles["baseline"][0].files.get().format == "tar"
    for job in AnalysisJob.objects.all():
        assert run_analysis(job.pk) == "succeeded", job.error
    base = bundles["baseline"][0]
    base.refresh_from_db()
    assert base.result.data["devices"]["8,0"]["seek"]["cnt"] == 6


def test_comment_create_rules(make_upload, seed000_before, user):
    """Comments need a logged-in user and a non-empty body."""
    from django.contrib.auth.models import AnonymousUser

    b, _ = bundle_create(files=[make_upload("b", seed000_before)])
    cmp_ = comparison_create(patch=Patch.objects.create(title="t"), baseline=[b], patched=[b])
    with pytest.raises(NotAllowed):
        comment_create(comparison=cmp_, user=AnonymousUser(), body="hi")
    with pytest.raises(UploadRejected):
        comment_create(comparison=cmp_, user=user, body="   ")
    c = comment_create(comparison=cmp_, user=user, body=" looks good ")
    assert c.body == "looks good" and c.thread.comparison == cmp_


def test_token_lifecycle(user, other_user):
    """A token authenticates until revoked; only its owner may revoke it."""
    token, key = token_create(user=user, name="ci")
    assert key.startswith("blk_") and token.prefix == key[:10]
    assert token_authenticate(key=key).user == user
    assert token_authenticate(key=key + "x") is None
    with pytest.raises(NotAllowed):
        token_revoke(token=token, user=other_user)
    token_revoke(token=token, user=user)
    with pytest.raises(TokenRejected, match="revoked"):
        token_authenticate(key=key)
    user.is_active = False
    user.save()
    _, key2 = token_create(user=user, name="again")
    with pytest.raises(TokenRejected, match="disabled"):
        token_authenticate(key=key2)


@pytest.mark.parametrize("suffix", [".tar", ".tar.xz", ".tar.zst", ".zip"])
def test_submission_from_every_archive_kind(suffix, seed000_before, seed000_after):
    """Every archive kind the form and REST accept is stored as an archive and unpacked by the
    worker: the seek histogram of its blkparse member comes out as from the plain file."""
    import io
    import tarfile
    import zipfile

    import zstandard

    def archive(name: str, data: bytes) -> bytes:
        buf = io.BytesIO()
        if suffix == ".zip":
            with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
                z.writestr(name, data)
            return buf.getvalue()
        mode = {".tar": "w", ".tar.xz": "w:xz", ".tar.zst": "w"}[suffix]
        with tarfile.open(fileobj=buf, mode=mode) as tar:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        raw = buf.getvalue()
        return zstandard.ZstdCompressor().compress(raw) if suffix == ".tar.zst" else raw

    cmp_, bundles = submission_create(
        title="t",
        baseline_files=[SimpleUploadedFile(f"base{suffix}", archive("g.txt", seed000_before))],
        patched_files=[SimpleUploadedFile(f"patched{suffix}", archive("g.txt", seed000_after))])
    stored = bundles["baseline"][0].files.get().format
    assert stored in ("tar", "zip"), stored
    for job in AnalysisJob.objects.all():
        assert run_analysis(job.pk) == "succeeded", job.error
    base = bundles["baseline"][0]
    base.refresh_from_db()
    assert base.result.data["devices"]["8,0"]["seek"]["cnt"] == 6
