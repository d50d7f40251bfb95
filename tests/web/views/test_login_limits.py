"""Login attempt limits with lockout (issue 10 item 11): per username and per client IP, on
the login page and the admin's; the form says when to retry."""

from __future__ import annotations

import re
import time

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"


def attempt(username: str, password: str, ip: str = "10.1.0.1", url: str = LOGIN):
    return Client(REMOTE_ADDR=ip).post(url, {"username": username, "password": password})


def test_wrong_passwords_lock_the_account(settings, user, password):
    """After N failures even the right password is refused (429) with when to retry; another
    account from the same address is not locked."""
    settings.BLKREVIEW_LOGIN_MAX_FAILURES = 3
    for _ in range(2):
        r = attempt(user.username, "wrong")
        assert r.status_code == 200 and "Please enter a correct username" in r.content.decode()
    r = attempt(user.username, "wrong")
    assert r.status_code == 429
    r = attempt(user.username, password, ip="10.1.0.2")
    assert r.status_code == 429
    text = r.content.decode()
    assert re.search(r"Try again in 15 minutes \(after \d\d:\d\d UTC\)", text), text[-800:]
    assert 0 < int(r["Retry-After"]) <= 900
    assert "_auth_user_id" not in Client().session
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user("second", "x@example.org", password)
    assert attempt("second", password).status_code == 302


def test_lockout_ends(settings, user, password):
    """The lock lasts BLKREVIEW_LOGIN_LOCKOUT_SECONDS; then the right password works."""
    settings.BLKREVIEW_LOGIN_MAX_FAILURES = 2
    settings.BLKREVIEW_LOGIN_LOCKOUT_SECONDS = 2
    attempt(user.username, "wrong")
    attempt(user.username, "wrong")
    assert attempt(user.username, password).status_code == 429
    time.sleep(2.2)
    assert attempt(user.username, password).status_code == 302


def test_one_address_trying_many_accounts_is_locked(settings, user, password):
    """Spraying one password over many usernames from one IP hits the per-IP limit."""
    settings.BLKREVIEW_LOGIN_IP_MAX_FAILURES = 4
    for i in range(4):
        attempt(f"nobody{i}", "guess", ip="10.1.0.7")
    r = attempt(user.username, password, ip="10.1.0.7")
    assert r.status_code == 429 and "Try again in" in r.content.decode()
    assert attempt(user.username, password, ip="10.1.0.8").status_code == 302


def test_admin_login_shares_the_counters(settings, user, password):
    """Failures on the admin login count too, and lock the admin login."""
    user.is_staff = True
    user.save()
    settings.BLKREVIEW_LOGIN_MAX_FAILURES = 2
    for _ in range(2):
        attempt(user.username, "wrong", url="/admin/login/")
    r = attempt(user.username, password, url="/admin/login/")
    assert "Try again in" in r.content.decode()
    assert attempt(user.username, password).status_code == 429


def test_success_resets_the_count(settings, user, password):
    """A good login clears the account's failures: they do not add up over days."""
    settings.BLKREVIEW_LOGIN_MAX_FAILURES = 3
    attempt(user.username, "wrong")
    attempt(user.username, "wrong")
    assert attempt(user.username, password).status_code == 302
    attempt(user.username, "wrong")
    attempt(user.username, "wrong")
    assert attempt(user.username, password).status_code == 302
