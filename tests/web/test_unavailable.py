"""A dependency that is down: /healthz says which one without internals; a crash that is not
the database's stays a short 500. The database really going down and coming back (a second
PostgreSQL cluster, a live server): tests/e2e/test_database_restart.py."""

from __future__ import annotations

import socket

import pytest
from django.test.utils import override_settings

from tests.conftest import use_broker

pytestmark = pytest.mark.django_db


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_healthz_names_the_broker_that_is_down_without_its_address(client, caplog):
    port = _free_port()
    with use_broker(f"redis://127.0.0.1:{port}/0"):
        r = client.get("/healthz")
    assert r.status_code == 503
    assert r.json() == {"status": "unavailable", "database": "ok", "broker": "down",
                        "storage": "ok"}
    assert str(port) not in r.content.decode()
    assert "broker check failed" in caplog.text


def test_healthz_names_the_storage_that_is_down(client, settings, tmp_path):
    storages = dict(settings.STORAGES)
    storages["default"] = {"BACKEND": "django.core.files.storage.FileSystemStorage",
                           "OPTIONS": {"location": str(tmp_path / "missing" / "media")}}
    with override_settings(STORAGES=storages):
        r = client.get("/healthz")
    assert r.status_code == 503 and r.json()["storage"] == "down"
    assert r.json()["database"] == "ok" and "missing" not in r.content.decode()
