"""Login/logout and the admin pages of every model."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_login_and_logout(client, user, password):
    """The login form logs in (CSRF-protected form); logout is a POST."""
    page = client.get(reverse("login")).content.decode()
    assert "csrfmiddlewaretoken" in page
    r = client.post(reverse("login"), {"username": user.username, "password": password})
    assert r.status_code == 302
    assert "maintainer" in client.get(reverse("home")).content.decode()
    r = client.post(reverse("logout"))
    assert r.status_code == 302
    assert "Log in" in client.get(reverse("home")).content.decode()


def test_wrong_password_stays_on_login(client, user):
    """A wrong password shows the login form again."""
    r = client.post(reverse("login"), {"username": user.username, "password": "nope"})
    assert r.status_code == 200 and "csrfmiddlewaretoken" in r.content.decode()


@pytest.mark.parametrize("model", ["patch", "tracebundle", "tracefile", "comparison",
                                   "analysisjob", "bundleresult", "thread", "comment", "apitoken",
                                   "comparisonresult", "comparisonchart"])
def test_admin_changelists(client, model):
    """Every model has a working admin page."""
    admin = get_user_model().objects.create_superuser("root", "r@example.org", "pw-root-1234")
    client.force_login(admin)
    r = client.get(reverse(f"admin:reviewapp_{model}_changelist"))
    assert r.status_code == 200
    assert client.get(reverse(f"admin:reviewapp_{model}_add")).status_code == 200
