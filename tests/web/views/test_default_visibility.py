"""The site's default visibility of new comparisons, and the form saying who can read what."""

from __future__ import annotations

import pytest
from django.test import override_settings
from django.urls import reverse

from reviewapp.models import Comparison

pytestmark = pytest.mark.django_db


def _checked(html: str, value: str) -> bool:
    i = html.index(f'name="public" value="{value}"')
    tag = html[html.rindex("<input", 0, i): html.index(">", i)]
    return "checked" in tag


def test_form_says_who_can_read_and_preselects_the_site_default(logged_in_client):
    """Both choices are spelled out; public is preselected by default, private when the site
    says so (BLKREVIEW_DEFAULT_VISIBILITY=private)."""
    html = logged_in_client.get(reverse("upload")).content.decode()
    assert "Who can read this comparison" in html
    assert "Public: anyone, without logging in, can read" in html
    assert "Private: only you, the people and groups you share it with, and staff" in html
    assert _checked(html, "on") and not _checked(html, "off")
    with override_settings(BLKREVIEW_DEFAULT_PUBLIC=False):
        html = logged_in_client.get(reverse("upload")).content.decode()
    assert _checked(html, "off") and not _checked(html, "on")


def test_choice_is_honoured_and_the_api_follows_the_site_default(logged_in_client, api_client,
                                                                 make_upload, seed000_before,
                                                                 seed000_after):
    """The form's "off" makes a private comparison; with a private site default an API
    submission that does not say is private too, one that says public=true is public."""
    r = logged_in_client.post(reverse("upload"), {
        "title": "block: a patch", "public": "off",
        "baseline_files": make_upload("b.txt", seed000_before),
        "patched_files": make_upload("p.txt", seed000_after)})
    assert r.status_code == 302
    assert Comparison.objects.get().public is False
    url = "/api/v1/submissions/"
    with override_settings(BLKREVIEW_DEFAULT_PUBLIC=False):
        body = api_client.post(url, {
            "title": "block: x", "baseline_files": [make_upload("b.txt", seed000_before)],
            "patched_files": [make_upload("p.txt", seed000_after)]}, format="multipart").json()
        assert Comparison.objects.get(pk=body["id"]).public is False
        body = api_client.post(url, {
            "title": "block: y", "public": "true",
            "baseline_files": [make_upload("b.txt", seed000_before)],
            "patched_files": [make_upload("p.txt", seed000_after)]}, format="multipart").json()
        assert Comparison.objects.get(pk=body["id"]).public is True
