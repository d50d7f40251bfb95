"""The maintainer role (Patchwork's project maintainers): members of the
``BLKREVIEW_MAINTAINERS_GROUP`` group set the review state of any patch they can read - on
the page and with ``PATCH /api/v1/patches/<id>/`` - and change nothing else of it."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from reviewapp.models import Event
from reviewapp.services.series import series_create_from_mail

pytestmark = pytest.mark.django_db
MBOX = Path(__file__).resolve().parents[2] / "data" / "mbox"


@pytest.fixture
def series(user):
    return series_create_from_mail(data=(MBOX / "series_split_head_v1.mbox").read_bytes(),
                                   user=user)


def _api(u):
    api = APIClient()
    api.force_authenticate(u)
    return api


def test_a_maintainer_sets_the_state_of_any_readable_patch(series, user, other_user, client,
                                                           settings):
    patch = series.patches.get(position=1)
    url = f"/api/v1/patches/{patch.pk}/"
    # not a maintainer: a reader only
    assert _api(other_user).patch(url, {"state": "accepted"}, format="json").status_code == 403
    client.force_login(other_user)
    assert 'id="patch-state-form"' not in client.get(f"/patches/{patch.pk}/").content.decode()
    Group.objects.create(name="maintainers").user_set.add(other_user)
    r = _api(other_user).patch(url, {"state": "accepted"}, format="json")
    assert r.status_code == 200 and r.json()["state"] == "accepted"
    ev = Event.objects.filter(kind="patch-state-changed").get()
    assert ev.actor == other_user and ev.payload["current_state"] == "accepted"
    # the page offers the form and takes it
    assert 'id="patch-state-form"' in client.get(f"/patches/{patch.pk}/").content.decode()
    client.post(f"/patches/{patch.pk}/state/", {"state": "changes-requested"})
    patch.refresh_from_db()
    assert patch.state == "changes-requested"
    # the state only: relinking the series or sharing stays the submitter's
    assert _api(other_user).post(f"/api/v1/series/{series.pk}/relink/", {"previous": None},
                                 format="json").status_code == 403
    assert _api(other_user).put(f"{url}access/", {"public": False},
                                format="json").status_code == 403
    # another group name in the settings: no longer a maintainer
    settings.BLKREVIEW_MAINTAINERS_GROUP = "block-maintainers"
    assert _api(other_user).patch(url, {"state": "new"}, format="json").status_code == 403


def test_a_maintainer_still_gets_404_for_a_private_patch(user, other_user):
    """Maintainers set states of what they can read; a private patch stays 404."""
    private = series_create_from_mail(data=(MBOX / "series_split_head_v2.mbox").read_bytes(),
                                      user=user, public=False).patches.get(position=1)
    Group.objects.create(name="maintainers").user_set.add(other_user)
    r = _api(other_user).patch(f"/api/v1/patches/{private.pk}/", {"state": "accepted"},
                               format="json")
    assert r.status_code == 404
