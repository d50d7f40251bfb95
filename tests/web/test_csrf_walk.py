"""CSRF on every form (issue 8, Access): every route of the URLconf that takes a write is refused
without the CSRF token to a logged-in browser session, and every POST form a page renders
carries the token.

The routes and the objects come from the access walk (tests/web/test_access_walk.py), so a
route added later is covered here too. API routes are included: a session-authenticated write
to /api/v1/ is checked by DRF's SessionAuthentication; a token-authenticated one carries no
cookie and needs no CSRF token (checked once below).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from tests.web import test_access_walk as walk
from tests.web.test_access_walk import ROUTES, Route, World, _url

pytestmark = pytest.mark.django_db
world = walk.world  # the access walk's users, objects and tokens (a fixture)

WRITES = ("POST", "PUT", "PATCH", "DELETE")
_FORM = re.compile(r"<form\b[^>]*>.*?</form>", re.S | re.I)


def _owner(world: World) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.users["owner"])
    return client


def _send(client: Client, method: str, url: str, **extra: Any) -> Any:
    if method == "POST":
        return client.post(url, {}, **extra)
    return client.generic(method, url, b"{}", content_type="application/json", **extra)


def _objects(world: World, route: Route) -> dict[str, Any] | None:
    return world.objects["private"] if route.kinds else None


def test_every_write_without_the_csrf_token_is_refused(world: World) -> None:
    """The owner's own session, every write method of every route, private objects: 403 and
    the answer names CSRF (not some other refusal that happens to be 403)."""
    client = _owner(world)
    problems = []
    walked = 0
    for route in ROUTES:
        url = _url(route, _objects(world, route))
        for method in (m for m in route.methods if m in WRITES):
            walked += 1
            r = _send(client, method, url)
            body = r.content.decode(errors="replace")
            if r.status_code != 403 or "csrf" not in body.lower():
                problems.append(f"{method} {url} ({route.name}): {r.status_code} {body[:120]!r}")
    assert walked > 40  # the walk really sees the write routes
    assert not problems, "writes that do not need the CSRF token:\n" + "\n".join(problems)


def test_the_same_write_with_the_token_passes_the_check(world: World) -> None:
    """Control: the refusal above is the CSRF check. With the cookie's token the owner's
    comment, thread, verdict and share forms get past it (a redirect or 2xx/4xx form answer,
    never the CSRF 403)."""
    client = _owner(world)
    objs = world.objects["private"]
    page = client.get(f"/comparisons/{objs['comparison'].pk}/")
    assert page.status_code == 200
    token = client.cookies["csrftoken"].value
    for name in ("comparison-thread-create", "patch-verdict", "comparison-sharing"):
        route = next(r for r in ROUTES if r.name == name)
        url = _url(route, objs)
        r = client.post(url, {"csrfmiddlewaretoken": token})
        assert not (r.status_code == 403 and b"CSRF" in r.content), (name, r.status_code)
        r = client.post(url, {}, HTTP_X_CSRFTOKEN=token)
        assert not (r.status_code == 403 and b"CSRF" in r.content), (name, r.status_code)


def test_api_token_writes_need_no_csrf_token(world: World) -> None:
    """A CI bot's token request has no session cookie: no CSRF check applies to it."""
    from reviewapp.services.tokens import token_create

    _, key = token_create(user=world.users["owner"], name="bot")
    client = Client(enforce_csrf_checks=True)
    patch = world.objects["private"]["patch"]
    r = client.post(f"/api/v1/patches/{patch.pk}/checks/",
                    {"context": "ci-bot", "state": "success"},
                    content_type="application/json", HTTP_AUTHORIZATION=f"Token {key}")
    assert r.status_code == 201, r.content


def test_every_rendered_post_form_carries_the_token(world: World) -> None:
    """Every page the owner can open (private objects: all panels shown), every <form
    method=post> in it has the csrfmiddlewaretoken field."""
    client = _owner(world)
    problems = []
    forms = 0
    for route in ROUTES:
        if route.api or "GET" not in route.methods:
            continue
        url = _url(route, _objects(world, route))
        r = client.get(url)
        if r.status_code != 200 or "html" not in r.get("Content-Type", ""):
            continue
        html = b"".join(r.streaming_content).decode() if r.streaming else r.content.decode()
        for form in _FORM.findall(html):
            head = form[:form.index(">") + 1]
            if not re.search(r"method=[\"']?post", head, re.I):
                continue
            forms += 1
            if 'name="csrfmiddlewaretoken"' not in form:
                problems.append(f"{url} ({route.name}): {head}")
    assert forms > 10  # the owner's pages really have forms
    assert not problems, "POST forms without the CSRF token:\n" + "\n".join(problems)
