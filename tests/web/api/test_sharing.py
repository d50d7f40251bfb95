"""Sharing (issue 10 §3, issue 8 Access): the owner shares a private comparison or patch with
named users and groups, to read or to change; the page form and the API agree."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from reviewapp.models import AccessGrant, Patch
from reviewapp.services.comparisons import submission_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def private(user, make_upload, seed000_before, seed000_after):
    comparison, _ = submission_create(
        title="PRIVATE patch", baseline_files=[make_upload("b.txt", seed000_before)],
        patched_files=[make_upload("a.txt", seed000_after)], public=False, user=user)
    return comparison


@pytest.fixture
def third(db, password):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("third", "t@example.org", password)


def _api(u):
    c = APIClient()
    c.force_authenticate(u)
    return c


def _reads(u, comparison) -> list[int]:
    api = _api(u)
    bundle = comparison.baseline_bundles.get()
    return [api.get(f"/api/v1/comparisons/{comparison.pk}/").status_code,
            api.get(f"/api/v1/bundles/{bundle.pk}/").status_code,
            api.get(f"/api/v1/jobs/{bundle.jobs.get().pk}/").status_code]


def _add_run(u, comparison, make_upload, make_blkparse) -> int:
    api = _api(u)
    b = api.post("/api/v1/bundles/", {"files": [make_upload("x.txt", make_blkparse([0, 8]))]},
                 format="multipart").json()
    return api.post(f"/api/v1/comparisons/{comparison.pk}/bundles/",
                    {"side": "patched", "bundles": [b["id"]]}, format="json").status_code


def test_page_form_shares_read_then_write_then_removes(client, user, other_user, private,
                                                       make_upload, make_blkparse):
    """Owner shares on the page: read lets the user see it (404 before), write lets them add
    a run (403 before), removing the grant makes it 404 again."""
    url = f"/comparisons/{private.pk}/sharing/"
    assert _reads(other_user, private) == [404, 404, 404]
    client.force_login(user)
    r = client.post(url, {"action": "add", "name": "someone", "level": "read"})
    assert r.status_code == 302
    assert _reads(other_user, private) == [200, 200, 200]
    assert _add_run(other_user, private, make_upload, make_blkparse) == 403
    client.post(url, {"action": "add", "name": "someone", "level": "write"})
    assert AccessGrant.objects.count() == 1
    assert _add_run(other_user, private, make_upload, make_blkparse) == 200
    page = client.get(private.get_absolute_url()).content.decode()
    assert "someone" in page and "Share" in page
    grant = AccessGrant.objects.get()
    client.post(url, {"action": "remove", "grant": grant.pk})
    assert _reads(other_user, private) == [404, 404, 404]


def test_group_grant_and_visibility(client, user, other_user, third, private):
    """A grant to a group reaches its members only; the owner can make it public."""
    group = Group.objects.create(name="md-reviewers")
    other_user.groups.add(group)
    client.force_login(user)
    url = f"/comparisons/{private.pk}/sharing/"
    client.post(url, {"action": "add", "name": "group:md-reviewers", "level": "read"})
    assert _reads(other_user, private)[0] == 200
    assert _reads(third, private)[0] == 404
    client.post(url, {"action": "visibility", "public": "on"})
    assert _reads(third, private) == [200, 200, 200]


def test_only_the_owner_shares(client, user, other_user, third, private):
    """A write grant does not let one share further (403); outsiders get 404; unknown names
    are a form error."""
    from reviewapp.services.grants import grant_set

    grant_set(obj=private, by=user, user=other_user, level="write")
    url = f"/comparisons/{private.pk}/sharing/"
    client.force_login(other_user)
    assert client.post(url, {"action": "add", "name": "third", "level": "read"}).status_code == 403
    client.force_login(third)
    assert client.post(url, {"action": "add", "name": "third", "level": "read"}).status_code == 404
    client.force_login(user)
    r = client.post(url, {"action": "add", "name": "nobody-here", "level": "read"}, follow=True)
    assert "no user or group named" in r.content.decode()
    assert AccessGrant.objects.count() == 1


def test_api_access_endpoint(user, other_user, third, private, check):
    """GET/PUT /api/v1/comparisons/<id>/access/: the owner replaces visibility and grants;
    a write grantee gets 403, an outsider 404."""
    url = f"/api/v1/comparisons/{private.pk}/access/"
    path = "/api/v1/comparisons/{id}/access/"
    body = {"public": False, "grants": [{"user": "someone", "level": "write"},
                                        {"group": "md", "level": "read"}]}
    r = _api(user).put(url, body, format="json")
    assert r.status_code == 400 and "no user or group named 'md'" in r.json()["error"]
    Group.objects.create(name="md")
    r = _api(user).put(url, body, format="json")
    out = check(r, "put", path)
    assert r.status_code == 200 and out["public"] is False
    assert [(g["user"], g["group"], g["level"]) for g in out["grants"]] == [
        ("someone", None, "write"), (None, "md", "read")]
    assert check(_api(user).get(url), "get", path) == out
    r = _api(other_user).put(url, {"public": True}, format="json")
    assert r.status_code == 403
    check(r, "put", path)
    r = _api(third).get(url)
    assert r.status_code == 404
    check(r, "get", path)
    r = _api(user).put(url, {"grants": []}, format="json")
    assert check(r, "put", path)["grants"] == []


def test_private_patch_shared_with_a_user(client, user, other_user):
    """A private patch is 404 to others until the owner shares it (read grant)."""
    from reviewapp.services.grants import grant_set

    patch = Patch.objects.create(title="private patch", public=False, submitted_by=user)
    client.force_login(other_user)
    assert client.get(f"/patches/{patch.pk}/").status_code == 404
    grant_set(obj=patch, by=user, user=other_user, level="read")
    assert client.get(f"/patches/{patch.pk}/").status_code == 200
