"""The upload form: login, CSRF, form errors for bad input, landing on the comparison page."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from reviewapp.models import Comparison, TraceBundle

pytestmark = pytest.mark.django_db


def _post(client, **extra):
    data = {"title": "block: check the queue limit before bio submitting", "version": "v1",
            "public": "on"}
    data.update(extra)
    return client.post(reverse("upload"), data)


def test_upload_requires_login(client):
    """Anonymous users are sent to the login page."""
    r = client.get(reverse("upload"))
    assert r.status_code == 302 and reverse("login") in r["Location"]


def test_upload_form_renders_with_csrf(logged_in_client):
    """The form carries a CSRF token and both sides' file inputs (multiple)."""
    r = logged_in_client.get(reverse("upload"))
    html = r.content.decode()
    assert r.status_code == 200
    assert "csrfmiddlewaretoken" in html
    assert 'name="baseline_files"' in html and 'name="patched_files"' in html
    assert "multiple" in html


def test_upload_without_csrf_token_is_refused(user, make_upload, seed000_before):
    """CSRF is enforced on the form."""
    c = Client(enforce_csrf_checks=True)
    c.force_login(user)
    r = _post(c, baseline_files=make_upload("b", seed000_before),
              patched_files=make_upload("p", seed000_before))
    assert r.status_code == 403
    assert not Comparison.objects.exists()


def test_upload_success_lands_on_comparison_page(logged_in_client, make_upload, seed000_before,
                                                 seed000_after, user):
    """A good upload redirects to the new comparison's page."""
    r = _post(logged_in_client, baseline_files=make_upload("before.txt", seed000_before),
              patched_files=make_upload("after.txt", seed000_after),
              baseline_kernel="6.17.13", patched_kernel="6.18.15",
              stack="md raid5 8 disks", limits="max_sectors_kb=1024", workload="dd bs=4480k",
              policy="split_remainder=head")
    cmp_ = Comparison.objects.get()
    assert r.status_code == 302 and r["Location"] == cmp_.get_absolute_url()
    assert cmp_.created_by == user and cmp_.policy == "split_remainder=head"
    kernels = {b.role: b.kernel for b in TraceBundle.objects.all()}
    assert kernels == {"baseline": "6.17.13", "patched": "6.18.15"}
    assert {b.limits for b in TraceBundle.objects.all()} == {"max_sectors_kb=1024"}
    page = logged_in_client.get(r["Location"]).content.decode()
    assert "max_sectors_kb=1024" in page and "6.18.15" in page


def test_upload_several_files_per_side(logged_in_client, make_upload, make_blkparse):
    """Several files on one side become one bundle with several files."""
    r = logged_in_client.post(reverse("upload"), {
        "title": "t", "baseline_files": [make_upload("a.txt", make_blkparse([0, 128])),
                                         make_upload("b.txt", make_blkparse([512, 640]))],
        "patched_files": [make_upload("c.txt", make_blkparse([0, 128, 256]))]})
    assert r.status_code == 302
    base = Comparison.objects.get().baseline_bundles.get()
    assert sorted(base.files.values_list("name", flat=True)) == ["a.txt", "b.txt"]


def test_upload_empty_is_a_form_error(logged_in_client):
    """No files: the form says so, nothing is created."""
    r = _post(logged_in_client)
    assert r.status_code == 400
    html = r.content.decode()
    assert "Upload at least one baseline file." in html
    assert "Upload at least one patched file." in html
    assert not TraceBundle.objects.exists()


def test_upload_empty_file_is_a_form_error(logged_in_client, make_upload, seed000_before):
    """A zero-byte file is refused (Django's own 'empty' check or ours) on the page."""
    r = _post(logged_in_client, baseline_files=make_upload("empty.txt", b""),
              patched_files=make_upload("p", seed000_before))
    assert r.status_code == 400
    assert "empty" in r.content.decode()
    assert not Comparison.objects.exists()


def test_upload_unknown_format_is_a_form_error(logged_in_client, make_upload, seed000_before):
    """A file that is not a trace: the error names it, on the side's field."""
    r = _post(logged_in_client, baseline_files=make_upload("b", seed000_before),
              patched_files=make_upload("notes.md", b"# my notes\nnothing to see\n"))
    assert r.status_code == 400
    html = r.content.decode()
    assert "notes.md: not a recognised trace" in html
    assert 'id="field-patched_files"' in html
    assert not Comparison.objects.exists()


def test_upload_malformed_line_is_a_form_error(logged_in_client, make_upload, seed000_before):
    """A malformed line near the top: a form error with the file and line, nothing stored."""
    bad = seed000_before + b"8,0 0 9 11.4 843 G R 1407x + 128 [dd]\n"
    r = _post(logged_in_client, baseline_files=make_upload("before.txt", bad),
              patched_files=make_upload("after.txt", seed000_before))
    assert r.status_code == 400
    html = r.content.decode()
    assert "before.txt, line 8: " in html
    assert 'id="field-baseline_files"' in html
    assert not Comparison.objects.exists()


def test_upload_over_limit_is_a_form_error(logged_in_client, make_upload, seed000_before,
                                           settings):
    """Over the size limit: a clear message on the page, status 413."""
    settings.BLKREVIEW_MAX_UPLOAD_BYTES = 100
    r = _post(logged_in_client, baseline_files=make_upload("b", seed000_before),
              patched_files=make_upload("p", seed000_before))
    assert r.status_code == 413
    assert "over the upload limit" in r.content.decode()
    assert not Comparison.objects.exists()


def test_upload_takes_title_from_patch_mail(logged_in_client, make_upload, seed000_before,
                                            seed000_after):
    """With no title typed, the patch mail fills title, version and author."""
    mail = (b"From: Yu Kuai <yukuai3@example.com>\nSubject: [PATCH v2] block: place split bios"
            b" at the head of current->bio_list\nMessage-ID: <x@y>\n\nbody\n")
    r = logged_in_client.post(reverse("upload"), {
        "mbox": make_upload("patch.mbox", mail),
        "baseline_files": make_upload("b", seed000_before),
        "patched_files": make_upload("p", seed000_after)})
    assert r.status_code == 302
    patch = Comparison.objects.get().patch
    assert patch.title == "block: place split bios at the head of current->bio_list"
    assert (patch.version, patch.message_id) == ("v2", "x@y")
    assert patch.author == "Yu Kuai <yukuai3@example.com>"


def test_upload_thresholds_stored_and_bad_ones_are_a_form_error(logged_in_client, make_upload,
                                                                seed000_before, seed000_after):
    """Check thresholds typed in the form are stored on the comparison; unknown names are a
    form error on the thresholds field and nothing is stored."""
    r = _post(logged_in_client, baseline_files=[make_upload("b.txt", seed000_before)],
              patched_files=[make_upload("a.txt", seed000_after)],
              thresholds="throughput_drop_fail_pct=5")
    assert r.status_code == 302
    assert Comparison.objects.get().thresholds == {"throughput_drop_fail_pct": 5.0}
    r = _post(logged_in_client, baseline_files=[make_upload("b2.txt", seed000_before + b"\n")],
              patched_files=[make_upload("a2.txt", seed000_after + b"\n")],
              thresholds="speed=fast")
    assert r.status_code == 400
    assert "unknown name" in r.content.decode()
    assert Comparison.objects.count() == 1
