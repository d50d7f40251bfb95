"""Browser: Playwright driving Debian's chromium logs in, uploads through the form, waits for
the real worker, and sees both seek histograms drawn (plot containers with data)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
DEMO = Path(__file__).resolve().parents[2] / "reviewapp" / "demo"


@contextlib.contextmanager
def chromium(monkeypatch: Any) -> Iterator[Any]:
    """Debian's chromium under Playwright for one test; on the way out, the database
    connections the test opened while Playwright ran are closed.

    Playwright's sync API keeps an asyncio loop running in this thread. Django's async-unsafe
    guard would trip on the test's ORM calls (hence DJANGO_ALLOW_ASYNC_UNSAFE), and Django's
    connection handler (asgiref ``Local``, thread-critical) then keeps the connection of those
    calls in a context-local slot instead of the thread's. pytest-django closes the thread's
    connection at teardown, never that one, so dropping the test database warned "database
    ... is being accessed by other users". ``connections.close_all()`` while the loop still
    runs closes the context-local one; the live server's request threads close their own.
    """
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from django.db import connections
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
            connections.close_all()


@pytest.fixture
def browser_page(monkeypatch):
    with chromium(monkeypatch) as browser:
        yield browser.new_page()


def test_login_upload_wait_and_see_both_histograms(celery_worker, live_server, user, password,
                                                   browser_page):
    """Log in, upload seed 000 before/after through the form, wait, see the plotted charts."""
    page = browser_page
    page.set_default_timeout(30_000)
    page.goto(f"{live_server.url}/accounts/login/?next=/upload/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/upload/")

    page.fill("#id_title", "block: place split bios at the head of current->bio_list")
    page.fill("#id_version", "v2")
    page.set_input_files("#id_baseline_files", str(DEMO / "seed000_before.blkparse.txt"))
    page.set_input_files("#id_patched_files", str(DEMO / "seed000_after.blkparse.txt"))
    page.fill("#id_baseline_kernel", "6.17.13")
    page.fill("#id_patched_kernel", "6.18.15")
    page.click("#upload-submit")
    page.wait_for_url(f"{live_server.url}/comparisons/*/")

    # The page polls progress.json and reloads when the worker is done: first with the observed
    # histograms, then (comparison step done) as lazy sections.
    page.wait_for_selector("#status[data-complete='1']", timeout=180_000)
    assert page.locator("#status-text").text_content() == "ready"
    page.locator("#section-seek").scroll_into_view_if_needed()
    page.wait_for_selector("#section-seek[data-state='loaded']", timeout=30_000)
    for side in ("baseline", "patched"):
        for chart in ("seek", "sizes"):
            section = "seek" if chart == "seek" else "fragmentation"
            page.locator(f"#section-{section}").scroll_into_view_if_needed()
            page.wait_for_selector(
                f"#section-{section} .plot[data-chart='{chart}'][data-side='{side}'][data-rendered='1']",
                timeout=30_000)
    seek = page.evaluate("""() => {
        const out = {};
        for (const side of ['baseline', 'patched']) {
            const el = document.querySelector(
                `#section-seek .plot[data-chart='seek'][data-side='${side}']`);
            out[side] = {x: el.data[0].x, y: el.data[0].y,
                         bars: el.querySelectorAll('.bars .point').length};
        }
        return out;
    }""")
    base = dict(zip(seek["baseline"]["x"], seek["baseline"]["y"]))
    patched = dict(zip(seek["patched"]["x"], seek["patched"]["y"]))
    assert sum(base.values()) == 6 and base["[256, 512)"] == 2
    assert sum(patched.values()) == 7 and patched["[64, 128)"] == 7
    assert seek["baseline"]["bars"] > 0 and seek["patched"]["bars"] > 0
    assert page.locator("table.numbers").first.is_visible()
