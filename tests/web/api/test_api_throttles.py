"""API throttles (issue 10 item 11): per token/user, per IP, writes, bad tokens; 429 with
Retry-After and the JSON error shape. Each test lowers one rate; the defaults are far higher."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

LIST = "/api/v1/comparisons/"
HIGH = {"anon": "1000/minute", "user": "1000/minute", "ip": "1000/minute",
        "write": "1000/minute", "bad_token": "1000/minute"}


def rates(settings: Any, **low: str) -> None:
    settings.BLKREVIEW_THROTTLE_RATES = {**HIGH, **low}


def client(token: str | None = None, ip: str = "127.0.0.1") -> APIClient:
    c = APIClient(REMOTE_ADDR=ip)
    if token:
        c.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return c


def assert_throttled(response: Any) -> dict[str, Any]:
    assert response.status_code == 429, response.content[:300]
    body = response.json()
    assert body["code"] == "throttled" and body["error"].startswith("request throttled: ")
    wait = int(response["Retry-After"])
    assert 0 < wait <= 3600 and body["retry_after"] == wait
    return body


def test_per_token_limit_is_429_with_retry_after(settings, user, other_user):
    """A token over its rate gets 429 + Retry-After; another token of the same user and
    another user's token still pass."""
    from reviewapp.services.tokens import token_create

    rates(settings, user="3/minute")
    _, key1 = token_create(user=user, name="a")
    _, key2 = token_create(user=user, name="b")
    _, key3 = token_create(user=other_user, name="c")
    c1 = client(key1)
    for _ in range(3):
        assert c1.get(LIST).status_code == 200
    assert_throttled(c1.get(LIST))
    assert client(key2).get(LIST).status_code == 200
    assert client(key3).get(LIST).status_code == 200


def test_anonymous_limit_is_per_ip(settings):
    """Anonymous requests are counted per client address."""
    rates(settings, anon="2/minute")
    a = client(ip="10.0.0.1")
    assert a.get(LIST).status_code == 200 and a.get(LIST).status_code == 200
    assert_throttled(a.get(LIST))
    assert client(ip="10.0.0.2").get(LIST).status_code == 200


def test_ip_limit_covers_every_token_from_one_address(settings, user, other_user):
    """Many tokens from one address share the per-IP budget (id enumeration with fresh
    tokens does not escape it)."""
    from reviewapp.services.tokens import token_create

    rates(settings, ip="4/minute")
    keys = [token_create(user=u, name="t")[1] for u in (user, other_user)]
    for i in range(4):
        assert client(keys[i % 2], ip="10.0.0.9").get(f"/api/v1/comparisons/{900000 + i}/"
                                                      ).status_code == 404
    assert_throttled(client(keys[0], ip="10.0.0.9").get(LIST))
    assert client(keys[0], ip="10.0.0.10").get(LIST).status_code == 200


def test_write_limit_counts_posts_not_reads(settings, api_token):
    """Creating comparisons/uploads has its own, lower budget; reads are not counted in it."""
    rates(settings, write="2/hour")
    c = client(api_token)
    for _ in range(2):
        assert c.post(LIST, {"baseline": [1], "patched": [2]}, format="json").status_code == 400
    assert_throttled(c.post(LIST, {"baseline": [1], "patched": [2]}, format="json"))
    assert_throttled(c.post("/api/v1/bundles/", {}, format="multipart"))
    assert c.get(LIST).status_code == 200


def test_bad_tokens_are_throttled_per_ip(settings, api_token):
    """Guessing tokens: 401 until the address's budget of failures is spent, then 429; a good
    token from that address still works."""
    rates(settings, bad_token="3/minute")
    for i in range(3):
        r = client(f"wrong-{i}", ip="10.0.0.5").get(LIST)
        assert r.status_code == 401
    assert_throttled(client("wrong-x", ip="10.0.0.5").get(LIST))
    assert client("wrong-y", ip="10.0.0.6").get(LIST).status_code == 401
    assert client(api_token, ip="10.0.0.5").get(LIST).status_code == 200


def test_defaults_are_high_and_configurable():
    """The shipped defaults leave room for the suite and benchmarks; env vars set them."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "BLKREVIEW_THROTTLE_USER": "7/hour", "BLKREVIEW_QUOTA_MB_PER_DAY": "3",
           "BLKREVIEW_LOGIN_MAX_FAILURES": "4"}
    out = subprocess.run(
        [sys.executable, "-c", "import json, reviewapp.settings as s; print(json.dumps("
         "[s.BLKREVIEW_THROTTLE_RATES, s.BLKREVIEW_QUOTA_BYTES_PER_DAY, "
         "s.BLKREVIEW_LOGIN_MAX_FAILURES, s.CACHES['default']['BACKEND']]))"],
        cwd=root, env=env, capture_output=True, text=True, timeout=60, check=True)
    throttle, quota, failures, backend = json.loads(out.stdout)
    assert throttle["user"] == "7/hour" and throttle["anon"] == "1200/minute"
    assert quota == 3 * 2**20 and failures == 4
    assert backend == "django.core.cache.backends.redis.RedisCache"
