"""Sharing a series (issue 8 Access): the owner shares a private series with users and groups
on its page (*Share*) or with ``PUT /api/v1/series/<id>/access/``; the grant reaches the
series' patches at the same level; outsiders get 404 on every series and patch route."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from reviewapp import constants as c
from reviewapp.models import AccessGrant
from reviewapp.services.series import series_create_from_mail

pytestmark = pytest.mark.django_db
MBOX = Path(__file__).resolve().parents[2] / "data" / "mbox"


@pytest.fixture
def private_series(user):
    return series_create_from_mail(data=(MBOX / "series_split_head_v1.mbox").read_bytes(),
                                   user=user, public=False)


@pytest.fixture
def third(db, password):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("third", "t@example.org", password)


def _api(u: Any) -> APIClient:
    api = APIClient()
    api.force_authenticate(u)
    return api


def _reads(u: Any, series: Any) -> dict[str, int]:
    """Status of every read route of the series and of its patches, as ``u``."""
    from django.test import Client

    page = Client()
    page.force_login(u)
    api = _api(u)
    out = {f"/series/{series.pk}/": page.get(f"/series/{series.pk}/").status_code,
           f"/series/{series.pk}/trailers.txt":
               page.get(f"/series/{series.pk}/trailers.txt").status_code}
    for suffix in ("", "checks/", "verdicts/"):
        url = f"/api/v1/series/{series.pk}/{suffix}"
        out[url] = api.get(url).status_code
    for p in series.patches.all():
        out[f"/patches/{p.pk}/"] = page.get(f"/patches/{p.pk}/").status_code
        for suffix in ("", "checks/", "verdicts/", "threads/"):
            url = f"/api/v1/patches/{p.pk}/{suffix}"
            out[url] = api.get(url).status_code
    return out


def _listed(u: Any, series: Any) -> tuple[bool, int]:
    """(the series is in /api/v1/series/, how many of its patches /api/v1/patches/ lists)."""
    api = _api(u)
    ids = {s["id"] for s in api.get("/api/v1/series/").json()["results"]}
    patches = api.get("/api/v1/patches/", {"series": series.pk}).json()["results"]
    return series.pk in ids, len(patches)


def test_grant_on_a_series_reaches_its_patches(client, user, other_user, private_series):
    """Read grant (page form): the series and its patches' pages and API answer 200 and the
    lists show them, but changing a patch's state or relinking is 403; write grant (API):
    both pass; removing the grants makes every route 404 again."""
    series = private_series
    patch = series.patches.order_by("position").first()
    before = _reads(other_user, series)
    assert set(before.values()) == {404}, before
    assert _listed(other_user, series) == (False, 0)

    client.force_login(user)
    r = client.post(f"/series/{series.pk}/sharing/", {"action": "add", "name": "someone",
                                                       "level": "read"})
    assert r.status_code == 302 and r["Location"].endswith("#sharing")
    assert set(_reads(other_user, series).values()) == {200}
    assert _listed(other_user, series) == (True, 2)
    other = _api(other_user)
    assert other.patch(f"/api/v1/patches/{patch.pk}/", {"state": "accepted"},
                       format="json").status_code == 403
    assert other.post(f"/api/v1/series/{series.pk}/relink/", {"previous": None},
                      format="json").status_code == 403

    r = _api(user).put(f"/api/v1/series/{series.pk}/access/",
                       {"grants": [{"user": "someone", "level": "write"}]}, format="json")
    assert r.status_code == 200 and r.json()["grants"][0]["level"] == "write"
    r = other.patch(f"/api/v1/patches/{patch.pk}/", {"state": "accepted"}, format="json")
    assert r.status_code == 200 and r.json()["state"] == "accepted"
    assert other.post(f"/api/v1/series/{series.pk}/relink/", {"previous": None},
                      format="json").status_code == 200
    # a write grant changes the series, not who may see it
    assert other.put(f"/api/v1/series/{series.pk}/access/", {"public": True},
                     format="json").status_code == 403
    assert other.get(f"/api/v1/series/{series.pk}/access/").status_code == 403

    r = _api(user).put(f"/api/v1/series/{series.pk}/access/", {"grants": []}, format="json")
    assert r.status_code == 200 and r.json() == {"public": False, "grants": []}
    assert set(_reads(other_user, series).values()) == {404}


def test_series_access_api_and_outsiders(user, other_user, third, private_series, check):
    """GET/PUT /api/v1/series/<id>/access/ (schema-checked): the owner sets a group grant and
    visibility; a group member reads the patches; an outsider gets 404 on the access route
    and every series route; making it public opens it and its patches to anyone, private
    again closes them."""
    series = private_series
    url, path = f"/api/v1/series/{series.pk}/access/", "/api/v1/series/{id}/access/"
    Group.objects.create(name="md-reviewers").user_set.add(other_user)
    r = _api(user).put(url, {"grants": [{"group": "md-reviewers", "level": "read"}]},
                       format="json")
    out = check(r, "put", path)
    assert [(g["user"], g["group"], g["level"]) for g in out["grants"]] == [
        (None, "md-reviewers", "read")]
    assert check(_api(user).get(url), "get", path) == out
    assert set(_reads(other_user, series).values()) == {200}
    r = _api(third).get(url)
    assert r.status_code == 404 and check(r, "get", path)
    assert set(_reads(third, series).values()) == {404}
    r = _api(user).put(url, {"public": True}, format="json")
    assert check(r, "put", path)["public"] is True
    assert set(_reads(third, series).values()) == {200}  # its patches went public with it
    assert AccessGrant.objects.count() == 1  # visibility left the grants alone
    _api(user).put(url, {"public": False}, format="json")
    assert set(_reads(third, series).values()) == {404}


def test_series_page_shows_the_share_panel_to_the_owner_only(client, user, other_user,
                                                             private_series):
    from reviewapp.services.grants import grant_set

    series = private_series
    grant_set(obj=series, by=user, user=other_user, level=c.GRANT_WRITE)
    client.force_login(user)
    page = client.get(f"/series/{series.pk}/").content.decode()
    assert 'id="sharing"' in page and f'action="/series/{series.pk}/sharing/"' in page
    assert "someone" in page and "read and change" in page
    client.force_login(other_user)
    page = client.get(f"/series/{series.pk}/").content.decode()
    assert 'id="sharing"' not in page
    assert client.post(f"/series/{series.pk}/sharing/", {
        "action": "visibility", "public": "on"}).status_code == 403
