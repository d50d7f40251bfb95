"""Every URL pattern and API route, walked by every kind of visitor (issue 10 §1-4, issue 8
Access).

The routes come from the URLconf itself, so a route added later is walked automatically. Each
URL keyword argument is filled from :data:`KWARG_KINDS` (by name) or :data:`SEGMENT_KINDS` (an
``<int:pk>`` after ``comparisons/`` is a comparison); a kwarg the walk cannot fill fails the
test with a message saying what to add. Visitors: the owner, a user granted read, a user granted
write, another user, anonymous, and on the API also the owner's read-only, revoked and expired
tokens; objects: a private and a public set (series, patch, comparison, bundles, jobs, results,
thread, comment) plus the owner's API token. What is checked, per route and method:

* a private object answers another user and anonymous exactly as an id that does not exist
  (404, or the login redirect / 401 / 405 that comes before any lookup), and no response to
  them contains a private object's text (lists included);
* a revoked or expired token is 401 on every API route; a read-only token is 403 on every API
  write;
* the owner reads every object route (200, or 405 where the route has no GET); users granted
  read or write read what the owner reads; on a public object anyone reads what the owner reads;
* writes: the owner and write grants pass the access check (not 401/403/404); a reader who may
  not change the object gets 403 (405 where the method does not exist); routes any reader may
  post to (comments, threads, verdicts) are listed in :data:`READER_WRITES`, routes only the
  owner may use (sharing) in :data:`OWNER_ONLY`;
* nothing answers 5xx.

Staff-only admin routes are walked by :func:`test_admin_routes_need_staff`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse

pytestmark = pytest.mark.django_db

PRIVATE_MARK = "PRIVMARK7q"
MISSING = 999_999_999

#: URL kwarg name -> object kind (routes that name their ids, e.g. ``<int:thread_id>``).
KWARG_KINDS = {
    "comparison_id": "comparison", "bundle_id": "bundle", "job_id": "job", "patch_id": "patch",
    "series_id": "series", "thread_id": "thread", "comment_id": "comment", "token_id": "token",
    "webhook_id": "webhook",
}
#: For a kwarg named ``pk`` or ``id``: the path segment before it -> object kind.
SEGMENT_KINDS = {
    "comparisons": "comparison", "bundles": "bundle", "jobs": "job", "patches": "patch",
    "series": "series", "threads": "thread", "comments": "comment", "tokens": "token",
    "webhooks": "webhook",
}
#: Kwargs that are not object ids: their value.
VALUE_KWARGS = {"version": "v1", "section": "index"}
#: Objects that belong to one user and are never shared: everyone else gets "does not exist".
PERSONAL_KINDS = {"token", "webhook"}

#: Routes where reading the object is enough to post (discussion and review verdicts).
READER_WRITES = {
    "comparison-comment", "comparison-thread-create", "patch-thread-create", "thread-reply",
    "patch-verdict", "series-verdict",
    "api-comparison-threads", "api-patch-threads", "api-thread-comments",
    "api-patch-verdicts", "api-series-verdicts",
    # CI bots post checks on what they can read (their token needs the "check" scope)
    "api-patch-checks",
}
#: Routes only the owner (not write grants) may use, for every method.
OWNER_ONLY = {
    "comparison-sharing", "patch-sharing", "series-sharing", "api-comparison-access",
    "api-series-access", "api-patch-access",
    # a comment's author (in the walk's world the owner wrote every comment)
    "comment-edit", "comment-delete",
}
#: Routes whose GET only the owner may use (the rest of OWNER_ONLY are POST-only anyway).
OWNER_ONLY_READS = {"api-comparison-access", "api-series-access", "api-patch-access"}

SAFE = ("GET",)
PAGE_WRITES = ("POST",)
API_WRITES = ("POST", "PUT", "PATCH", "DELETE")


@dataclass
class Route:
    name: str
    route: str  # the pattern text, for messages
    kwargs: dict[str, str] = field(default_factory=dict)  # kwarg -> kind or "=value"

    @property
    def api(self) -> bool:
        return self.route.startswith("api/")

    methods: tuple[str, ...] = ()

    @property
    def kinds(self) -> set[str]:
        return {k for k in self.kwargs.values() if not k.startswith("=")}


def _pattern_text(p: Any) -> str:
    return str(p.pattern).lstrip("^").replace("\\Z", "").replace("$", "")


_KWARG = re.compile(r"<(?:\w+:)?(\w+)>|\(\?P<(\w+)>[^)]*\)")


def _kinds_of(text: str) -> tuple[dict[str, str], list[str]]:
    """kwarg -> kind (or ``=value``) for one full route text; problems for those it cannot fill."""
    out, problems = {}, []
    for m in _KWARG.finditer(text):
        name = m.group(1) or m.group(2)
        if name in VALUE_KWARGS:
            out[name] = "=" + VALUE_KWARGS[name]
        elif name in KWARG_KINDS:
            out[name] = KWARG_KINDS[name]
        elif name in ("pk", "id"):
            before = text[:m.start()].rstrip("/").rsplit("/", 1)[-1]
            if before in SEGMENT_KINDS:
                out[name] = SEGMENT_KINDS[before]
            else:
                problems.append(f"{text!r}: kwarg {name!r} after {before!r}/: add {before!r} to "
                                f"SEGMENT_KINDS (and its object to the walk's world) in "
                                f"tests/web/test_access_walk.py")
        else:
            problems.append(f"{text!r}: unknown URL kwarg {name!r}: add it to KWARG_KINDS or "
                            f"VALUE_KWARGS (and its object to the walk's world) in "
                            f"tests/web/test_access_walk.py")
    return out, problems


def _methods(callback: Any, api: bool) -> tuple[str, ...]:
    """The methods to walk: GET and POST on pages; on a DRF view GET and the write methods it
    implements (others answer 405 to everyone before any lookup)."""
    cls = getattr(callback, "cls", None)
    if cls is None:
        return SAFE + PAGE_WRITES
    return SAFE + tuple(m for m in API_WRITES if hasattr(cls, m.lower()))


def all_routes(*, admin: bool = False) -> tuple[list[Route], list[str]]:
    """Every named route of the URLconf (admin's or everything else), and what could not be
    filled or named."""
    routes: list[Route] = []
    problems: list[str] = []

    def walk(patterns: Any, prefix: str, ns: list[str]) -> None:
        for p in patterns:
            text = prefix + _pattern_text(p)
            if isinstance(p, URLResolver):
                walk(p.url_patterns, text, ns + ([p.namespace] if p.namespace else []))
                continue
            assert isinstance(p, URLPattern)
            is_admin = "admin" in ns
            if is_admin != admin:
                continue
            if is_admin:  # Django's own routes, some unnamed: walked by their text
                routes.append(Route(":".join(ns + [p.name or "?"]), text))
                continue
            if not p.name:
                problems.append(f"{text!r} has no name: name it so the walk can reverse it")
                continue
            kwargs, bad = _kinds_of(text)
            problems.extend(bad)
            if not bad:
                routes.append(Route(":".join(ns + [p.name]), text, kwargs,
                                    _methods(p.callback, text.startswith("api/"))))

    walk(get_resolver().url_patterns, "", [])
    return routes, problems


ROUTES, ROUTE_PROBLEMS = all_routes()


def test_every_route_can_be_walked():
    """Every route is named and every kwarg maps to an object or a value (else: what to add)."""
    assert not ROUTE_PROBLEMS, "\n".join(ROUTE_PROBLEMS)
    assert len(ROUTES) > 40  # the walk really sees the URLconf


# --- the world ------------------------------------------------------------------------------

@dataclass
class World:
    users: dict[str, Any]
    objects: dict[str, dict[str, Any]]  # visibility -> kind -> object
    tokens: dict[str, str]  # "read-only" / "revoked" / "expired" -> key


def _make_set(vis: str, owner: Any) -> dict[str, Any]:
    from reviewapp import constants as c
    from reviewapp.models import (
        AnalysisJob,
        BundleResult,
        Comment,
        Comparison,
        ComparisonResult,
        Patch,
        Series,
        Thread,
        TraceBundle,
        TraceFile,
    )

    public = vis == "public"
    mark = "public-text" if public else PRIVATE_MARK
    series = Series.objects.create(title=f"[PATCH] {mark} series", stem=f"{mark} series",
                                   public=public, submitted_by=owner)
    patch = Patch.objects.create(series=series, position=1, title=f"{mark} patch",
                                 public=public, submitted_by=owner, diff="")
    bundles = []
    for role in (c.ROLE_BASELINE, c.ROLE_PATCHED):
        b = TraceBundle.objects.create(role=role, kernel=f"6.1-{mark}", checksum="0" * 64,
                                       uploaded_by=owner, parse_status=c.PARSE_PARSED)
        TraceFile.objects.create(bundle=b, name=f"{mark}.blkparse.txt", size=1,
                                 checksum="0" * 64, storage_name=f"traces/{mark}-{role}")
        job = AnalysisJob.objects.create(bundle=b, state=c.JOB_STATE_SUCCEEDED, progress=100)
        BundleResult.objects.create(bundle=b, job=job, data={"devices": {}})
        bundles.append(b)
    comparison = Comparison.objects.create(patch=patch, public=public, created_by=owner,
                                           status=c.COMPARISON_READY)
    comparison.baseline_bundles.set([bundles[0]])
    comparison.patched_bundles.set([bundles[1]])
    ComparisonResult.objects.create(
        comparison=comparison, state=c.JOB_STATE_SUCCEEDED, progress=100,
        report=f"report {mark}\n", verdict={"state": "pass", "reasons": [], "thresholds": {}},
        compare={}, model={})
    from reviewapp.services.results import charts_replace

    charts_replace(comparison_id=comparison.pk,
                   charts={("index", "", ""): '{"devices": [], "sections": []}'})
    thread = Thread.objects.create(comparison=comparison, title=f"{mark} thread",
                                   created_by=owner)
    comment = Comment.objects.create(thread=thread, author=owner, body=f"{mark} comment")
    return {"series": series, "patch": patch, "bundle": bundles[0], "job": bundles[0].jobs.get(),
            "comparison": comparison, "thread": thread, "comment": comment}


def _make_personal(owner: Any) -> dict[str, Any]:
    """Objects only their user ever sees (PERSONAL_KINDS)."""
    from reviewapp.models import Webhook
    from reviewapp.services.tokens import token_create

    token, _ = token_create(user=owner, name=f"{PRIVATE_MARK} token")
    hook = Webhook.objects.create(user=owner, url=f"https://ci.example.org/{PRIVATE_MARK}",
                                  secret="s" * 32)
    return {"token": token, "webhook": hook}


@pytest.fixture
def world(db: Any, settings: Any) -> World:
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from reviewapp.models import ApiToken
    from reviewapp.services.grants import grant_set
    from reviewapp.services.tokens import token_create, token_revoke

    # the walk makes thousands of requests: no rate limits here (floods tests them)
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_CLASSES": []}
    User = get_user_model()
    users = {name: User.objects.create_user(name, f"{name}@example.org", "pw-walk-1")
             for name in ("owner", "reader", "writer", "outsider")}
    owner = users["owner"]
    objects = {vis: _make_set(vis, owner) for vis in ("private", "public")}
    for vis in objects:
        for kind in ("comparison", "patch", "series"):
            grant_set(obj=objects[vis][kind], by=owner, user=users["reader"], level="read")
            grant_set(obj=objects[vis][kind], by=owner, user=users["writer"], level="write")
    personal = _make_personal(owner)
    for vis in objects:
        objects[vis].update(personal)
    _, read_only = token_create(user=owner, name="read-only", scopes=["read"])
    revoked, revoked_key = token_create(user=owner, name="revoked")
    token_revoke(token=revoked, user=owner)
    expired, expired_key = token_create(user=owner, name="expired",
                                        expires=timezone.now() + timedelta(days=1))
    ApiToken.objects.filter(pk=expired.pk).update(expires=timezone.now() - timedelta(seconds=1))
    return World(users=users, objects=objects,
                 tokens={"read-only": read_only, "revoked": revoked_key, "expired": expired_key})


# --- the walk -------------------------------------------------------------------------------

def _url(route: Route, objects: dict[str, Any] | None) -> str:
    kwargs = {}
    for name, kind in route.kwargs.items():
        if kind.startswith("="):
            kwargs[name] = kind[1:]
        else:
            kwargs[name] = objects[kind].pk if objects is not None else MISSING
    return reverse(route.name, kwargs=kwargs)


def _request(client: Any, method: str, url: str, headers: dict[str, str]) -> Any:
    if method == "GET":
        return client.get(url, **headers)
    if method == "POST":
        return client.post(url, {}, **headers)
    return client.generic(method, url, b"{}", content_type="application/json", **headers)


class Walker:
    def __init__(self, world: World) -> None:
        from django.test import Client

        self.world = world
        self.clients: dict[str, Any] = {}
        for name in ("owner", "reader", "writer", "outsider"):
            c = Client()
            c.force_login(world.users[name])
            self.clients[name] = c
        self.clients["anonymous"] = Client()
        self.headers: dict[str, dict[str, str]] = {name: {} for name in self.clients}
        for name, key in world.tokens.items():
            self.clients[name] = Client()
            self.headers[name] = {"HTTP_AUTHORIZATION": f"Token {key}"}
        self.problems: list[str] = []

    def status(self, actor: str, method: str, url: str, *, secret_ok: bool = True) -> int:
        r = _request(self.clients[actor], method, url, self.headers[actor])
        where = f"{method} {url} as {actor}"
        if r.status_code >= 500:
            self.problems.append(f"{where}: {r.status_code}")
        body = b"".join(r.streaming_content) if r.streaming else r.content
        if not secret_ok and PRIVATE_MARK.encode() in body:
            self.problems.append(f"{where}: the answer contains private text")
        if r.status_code == 302 and "/accounts/login/" in r.get("Location", ""):
            return 302
        return r.status_code

    def check(self, ok: bool, message: str) -> None:
        if not ok:
            self.problems.append(message)


def _walk_route(w: Walker, route: Route) -> None:
    methods = route.methods
    people = ["outsider", "anonymous", "reader", "writer", "owner"]  # owner last: it may change
    tokens = ["read-only", "revoked", "expired"] if route.api else []
    personal = bool(route.kinds & PERSONAL_KINDS)
    # personal objects have no public twin (and the owner's DELETE removes them)
    for vis in ("private",) if personal else ("private", "public"):
        url = _url(route, w.world.objects[vis] if route.kinds else None)
        missing = _url(route, None) if route.kinds else None
        for method in methods:
            write = method != "GET"
            got = {}
            for actor in tokens + people:
                may_see_secret = actor in ("owner", "reader", "writer", "read-only")
                got[actor] = w.status(actor, method, url, secret_ok=may_see_secret)
            where = f"{method} {url} ({route.name}, {vis})"
            for actor in ("revoked", "expired"):
                if actor in got:
                    w.check(got[actor] == 401, f"{where} with a {actor} token: {got[actor]}, not 401")
            if "read-only" in got and write:  # 405: the route has no such method at all
                w.check(got["read-only"] in (403, 405),
                        f"{where} with a read-only token: {got['read-only']}, not 403")
            if not route.kinds:
                continue
            # who cannot see it at all: exactly as if it did not exist
            blind = ["outsider", "anonymous"] if vis == "private" else []
            if personal:
                blind = ["outsider", "anonymous", "reader", "writer"]
            for actor in blind:
                expect = w.status(actor, method, missing)
                w.check(got[actor] == expect, f"{where} as {actor}: {got[actor]}, but a missing "
                        f"id answers {expect} (existence leaks)")
            owner_get_missing = None
            if not write:
                owner_get_missing = w.status("owner", "GET", missing)
                w.check(got["owner"] == 200 or (got["owner"] == 405 and owner_get_missing == 405),
                        f"{where} as owner: {got['owner']}, not 200")
                readers = [a for a in ("reader", "writer", "outsider", "anonymous")
                           if a not in blind and not (a in ("outsider", "anonymous")
                                                      and vis == "private")]
                for actor in readers:
                    if route.name in OWNER_ONLY_READS:
                        w.check(got[actor] in (403, 401, 302),
                                f"{where} as {actor}: {got[actor]}, not 403 (owner only)")
                    elif actor == "anonymous":
                        w.check(got[actor] in (got["owner"], 302, 401),
                                f"{where} as anonymous: {got[actor]}, owner gets {got['owner']}")
                    else:
                        w.check(got[actor] == got["owner"],
                                f"{where} as {actor}: {got[actor]}, owner gets {got['owner']}")
                continue
            # writes
            if personal:
                w.check(got["owner"] not in (401, 403, 404), f"{where} as owner: {got['owner']}")
                continue
            read_only = ["reader"] + (["outsider"] if vis == "public" else [])
            for actor in read_only:
                if route.name in READER_WRITES:
                    w.check(got[actor] not in (401, 403, 404),
                            f"{where} as {actor} (may read, may post here): {got[actor]}")
                else:
                    w.check(got[actor] in (403, 405),
                            f"{where} as {actor} (may read, not change): {got[actor]}, not 403 "
                            f"(if readers may do this, add {route.name!r} to READER_WRITES)")
            if vis == "public":
                w.check(got["anonymous"] in (302, 401, 403, 405),
                        f"{where} as anonymous: {got['anonymous']}")
            if route.name in OWNER_ONLY:
                w.check(got["writer"] in (403, 405),
                        f"{where} as writer (owner only): {got['writer']}, not 403")
            else:
                w.check(got["writer"] not in (401, 403, 404), f"{where} as writer: {got['writer']}"
                        f" (a write grant should pass; if only the owner may, add "
                        f"{route.name!r} to OWNER_ONLY)")
            w.check(got["owner"] not in (401, 403, 404), f"{where} as owner: {got['owner']}")


@pytest.mark.parametrize("route", ROUTES, ids=[r.name for r in ROUTES])
def test_walk(route: Route, world: World) -> None:
    """One route, every visitor, every method, private and public objects."""
    w = Walker(world)
    _walk_route(w, route)
    assert not w.problems, f"{route.name} ({route.route}):\n" + "\n".join(w.problems)


def test_admin_routes_need_staff(world: World) -> None:
    """Every admin route sends a logged-in non-staff user (the owner of everything) and
    anonymous visitors to the admin login, and answers them nothing else."""
    from django.test import Client

    routes, problems = all_routes(admin=True)
    assert routes and not problems, problems
    values = {"object_id": "1", "app_label": "reviewapp", "content_type_id": "1", "url": "x",
              "id": "1", "model_name": "comparison"}
    owner = Client()
    owner.force_login(world.users["owner"])
    bad = []
    for route in routes:
        names = [m.group(1) or m.group(2) for m in _KWARG.finditer(route.route)]
        unknown = [n for n in names if n not in values]
        assert not unknown, f"{route.route}: add a value for {unknown} in test_admin_routes_need_staff"
        url = "/" + _KWARG.sub(lambda m: values[m.group(1) or m.group(2)], route.route)
        if route.name in ("admin:login", "admin:logout"):
            continue  # the way in and out, open to all
        for client in (owner, Client()):
            r = client.get(url)
            if r.status_code not in (302, 404) or (
                    r.status_code == 302 and "/admin/login/" not in r["Location"]):
                bad.append(f"{url}: {r.status_code} {r.get('Location', '')}")
            if PRIVATE_MARK.encode() in r.content:
                bad.append(f"{url}: private text")
    assert not bad, "\n".join(bad)
