"""Browser (Playwright + Debian chromium): anchored threads on a finished comparison, the XSS
payload list rendered inert, and the series page across three versions.

The comparison (seed 000 before/after) is built by the worker's own functions in this process
and committed; the live server serves it. Threads are started by clicking a real plotly bar
and a metric row's 💬 button, replied to and resolved; the unresolved counts change; the
anchor link brings the row back highlighted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import finish_comparison, uploaded
from tests.e2e.test_browser import chromium

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DATA = Path(__file__).resolve().parents[1] / "data"
PAYLOADS = [line for line in (DATA / "xss" / "payloads.txt").read_text().splitlines()
            if line.strip()]


@pytest.fixture
def page(monkeypatch):
    with chromium(monkeypatch) as browser:
        pg = browser.new_page(viewport={"width": 1400, "height": 1000})
        pg.set_default_timeout(30_000)
        dialogs: list[str] = []
        pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        pg.dialogs = dialogs  # type: ignore[attr-defined]
        yield pg


@pytest.fixture
def seed_comparison(transactional_db, user, seed000_before, seed000_after):
    from reviewapp.services.comparisons import submission_create

    comparison, _ = submission_create(
        title="block: place split bios at the head of current->bio_list", version="v2",
        baseline_files=[uploaded("before.blkparse.txt", seed000_before)],
        patched_files=[uploaded("after.blkparse.txt", seed000_after)], user=user)
    return finish_comparison(comparison)


def login(page, origin, user, password, next_url):
    page.goto(f"{origin}/accounts/login/?next={next_url}")
    page.fill("#id_username", user.username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{origin}{next_url}*")


def unresolved(page) -> str:
    return page.locator("#unresolved-count").get_attribute("data-count")


def test_threads_on_chart_bar_and_metric_row_reply_resolve_counts(
        seed_comparison, live_server, user, password, page):
    """Click a seek bar -> thread anchored on it; 💬 on a metric row -> thread on the row;
    reply; resolve; the unresolved count goes 0 -> 1 -> 2 -> 1; the anchor link scrolls back
    to the row and highlights it."""
    origin, cmp_url = live_server.url, seed_comparison.get_absolute_url()
    login(page, origin, user, password, cmp_url)
    assert unresolved(page) == "0"
    page.locator("#section-seek").scroll_into_view_if_needed()
    page.wait_for_selector("#section-seek[data-state='loaded']")
    plot = "#section-seek .plot[data-chart='seek'][data-side='patched'][data-rendered='1']"
    page.wait_for_selector(plot)
    bars = page.locator(f"{plot} .bars .point path")
    heights = [bars.nth(i).bounding_box()["height"] for i in range(bars.count())]
    box = bars.nth(heights.index(max(heights))).bounding_box()  # the tallest bar
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_selector("#new-thread-anchor-label:not([hidden])")
    label = page.locator("#new-thread-anchor-label").text_content()
    assert "seek" in label and "bucket" in label, label
    assert page.locator("#new-thread-kind").input_value() == "chart"
    page.fill("#new-thread-body", "Why does this bucket move?")
    page.click("#new-thread-submit")
    page.wait_for_selector(".thread[data-thread]")
    assert unresolved(page) == "1"
    first = page.locator(".thread").first
    assert "bucket" in first.locator(".anchor-link").text_content()
    assert "patched" in (first.locator(".anchor-numbers").text_content() or "")

    # a metric row of the seek table
    page.locator("#section-seek").scroll_into_view_if_needed()
    page.wait_for_selector("#section-seek[data-state='loaded'] table.section-table .thread-row-btn")
    row = page.locator("#section-seek table.section-table tbody tr").filter(
        has_text="Zero-seek share").first
    metric = row.get_attribute("data-metric")
    row.locator(".thread-row-btn").click()
    assert page.locator("#new-thread-kind").input_value() == "metric"
    page.fill("#new-thread-body", "Zero seeks **doubled**: the point of the patch.")
    page.click("#new-thread-submit")
    page.wait_for_function("document.querySelectorAll('.thread').length == 2")
    assert unresolved(page) == "2"
    second = page.locator(".thread").nth(1)
    assert metric in second.locator(".anchor-link").text_content()
    assert second.locator(".body strong").text_content() == "doubled"

    # reply to the metric thread, then resolve it
    second.locator(".reply-form textarea").fill("Agreed, see the ordering section too.")
    second.locator(".reply-form button").click()
    page.wait_for_selector("text=Agreed, see the ordering section too.")
    page.locator(".thread").nth(1).locator(".resolve-button").click()
    page.wait_for_selector(".thread.resolved")
    assert unresolved(page) == "1"
    assert page.locator(".thread.resolved .thread-state").text_content().startswith("resolved")

    # the anchor link (the page's own address format) brings the row back, highlighted
    href = page.locator(".thread.resolved .anchor-link").get_attribute("href")
    assert "?anchor=" in href and "#dev=" in href and "section=seek" in href, href
    page.evaluate("window.scrollTo(0, 0)")
    page.locator(".thread.resolved .anchor-link").click()
    page.wait_for_selector("#section-seek tr.anchor-highlight")
    assert page.locator("#section-seek tr.anchor-highlight").get_attribute("data-metric") == metric
    # and the patch's page counts the comparison's open thread
    page.goto(f"{origin}{seed_comparison.patch.get_absolute_url()}")
    assert page.locator(".unresolved-total").get_attribute("data-count") == "1"
    # the permalink opened afresh (as from a mail) scrolls to the row and highlights it
    page.goto(f"{origin}{href}")
    page.wait_for_selector("#section-seek tr.anchor-highlight")
    assert page.locator("#section-seek tr.anchor-highlight").get_attribute("data-metric") == metric
    assert not page.dialogs


def test_xss_payloads_inert_in_the_browser(seed_comparison, live_server, user, password, page):
    """Every payload of tests/data/xss/payloads.txt posted as a comment: no dialog fires, no
    script runs, the payload text is shown."""
    origin, cmp_url = live_server.url, seed_comparison.get_absolute_url()
    login(page, origin, user, password, cmp_url)
    from reviewapp.models import Comment
    from reviewapp.services.threads import thread_create

    thread = thread_create(user=user, comparison=seed_comparison, body=PAYLOADS[0])
    for p in PAYLOADS[1:]:
        Comment.objects.create(thread=thread, author=user, body=p)
    page.goto(f"{origin}{cmp_url}")
    page.wait_for_selector(f"#thread-{thread.pk}")
    page.wait_for_timeout(1500)  # give onload/onerror/autofocus handlers time to fire
    page.goto(f"{origin}/threads/{thread.pk}/")
    page.wait_for_timeout(1000)
    assert page.dialogs == []
    assert page.evaluate("window.__xss === undefined")
    text = page.locator(f"#thread-{thread.pk}").inner_text()
    for marker in ("alert('xss1')", "onerror=alert('xss2')", "javascript:alert('xss5')",
                   "alert('xss27')"):
        assert marker in text, marker
    assert page.locator(f"#thread-{thread.pk} script, #thread-{thread.pk} img, "
                        f"#thread-{thread.pk} iframe, #thread-{thread.pk} svg").count() == 0


def test_series_page_three_versions(transactional_db, live_server, user, page):
    """The series page lists v1, v2, v3 side by side; each version links to its own page and
    its patches; the link reasons are shown."""
    from reviewapp.services.series import series_create_from_mail

    series = [series_create_from_mail(
        data=(DATA / "mbox" / f"series_split_head_v{v}.mbox").read_bytes(), user=user)
        for v in (1, 2, 3)]
    origin = live_server.url
    page.goto(f"{origin}/series/{series[0].pk}/")
    cols = page.locator(".version-col")
    assert cols.count() == 3
    assert [cols.nth(i).locator("h3 a").text_content() for i in range(3)] == ["v1", "v2", "v3"]
    assert "sent in reply to the earlier version" in cols.nth(2).text_content()
    cols.nth(2).locator("h3 a").click()
    page.wait_for_url(f"{origin}/series/{series[2].pk}/")
    assert page.locator(".version-col.current h3 a").text_content() == "v3"
    page.locator(".version-col.current .patches a").nth(1).click()
    page.wait_for_selector("pre.diff-lines .diff-line.dl-add")
    assert "submit_bio_noacct_nocheck" in page.locator("pre.diff-lines").inner_text()
    assert page.locator(".siblings").count() == 1
    assert not page.dialogs


def test_time_window_thread_draws_a_shaded_window(seed_comparison, live_server, user, password,
                                                  page):
    """Box-select a time window on a throughput chart -> a thread anchored on that window;
    following its anchor link (and opening the link afresh) draws the window as a shaded band
    on that panel: a plotly shape over x0..x1 with xref x and yref paper, seen in the SVG."""
    origin, cmp_url = live_server.url, seed_comparison.get_absolute_url()
    login(page, origin, user, password, cmp_url)
    page.locator("#section-throughput").scroll_into_view_if_needed()
    page.wait_for_selector("#section-throughput[data-state='loaded']")
    plot_sel = "#section-throughput .plot[data-side='patched'][data-rendered='1']"
    page.wait_for_selector(plot_sel)
    plot = page.locator(plot_sel).first
    chart = plot.get_attribute("data-chart")
    plot.hover()
    plot.locator(".modebar-btn[data-val='select']").first.click()
    box = plot.locator(".nsewdrag").first.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.3, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.5, y + 20, steps=8)
    page.mouse.move(box["x"] + box["width"] * 0.6, y + 40, steps=8)
    page.mouse.up()
    page.wait_for_selector("#new-thread-anchor-label:not([hidden])")
    label = page.locator("#new-thread-anchor-label").text_content()
    assert "window" in label and chart in label, label
    page.fill("#new-thread-body", "Throughput dips in this window.")
    page.click("#new-thread-submit")
    page.wait_for_selector(".thread[data-thread]")
    from reviewapp.models import Thread

    thread = Thread.objects.get(comparison=seed_comparison, anchor_kind="chart")
    x0, x1 = thread.anchor["x0"], thread.anchor["x1"]
    assert thread.anchor["chart"] == chart and 0 <= x0 < x1

    def band(selector: str) -> dict:
        page.wait_for_selector(f"{selector}[data-anchor-window]")
        return page.evaluate(
            """sel => { const p = document.querySelector(sel);
                        const s = (p.layout.shapes || []).filter(
                            x => x.name === 'thread-anchor-window');
                        return {shapes: s, drawn: p.querySelectorAll('.shapelayer path').length,
                                range: p.layout.xaxis.range}; }""",
            selector)

    target = (f"#section-throughput .plot[data-chart='{chart}'][data-side='patched']")
    link = page.locator(f"#thread-{thread.pk} .anchor-link")
    href = link.get_attribute("href")
    link.click()
    got = band(target)
    [shape] = got["shapes"]
    assert shape["type"] == "rect" and shape["xref"] == "x" and shape["yref"] == "paper"
    assert (shape["y0"], shape["y1"]) == (0, 1)
    assert abs(shape["x0"] - x0) < 1e-9 and abs(shape["x1"] - x1) < 1e-9
    assert got["drawn"] >= 1  # rendered in the SVG, not only in the layout
    # the permalink opened afresh (as from a mail): zoomed around the window, band drawn
    page.goto(f"{origin}{href}")
    got = band(target)
    assert len(got["shapes"]) == 1 and got["drawn"] >= 1
    lo, hi = got["range"]
    assert lo <= x0 and hi >= x1 and (hi - lo) > (x1 - x0)  # the window in its context
    assert not page.dialogs


def test_upload_form_offers_the_fixed_commits_runs_for_a_chosen_mail(
        seed_comparison, live_server, user, password, page):
    """Choosing a patch mail whose Fixes: names a known commit shows that commit's comparisons
    as baseline choices (upload.js asks /upload/fixes.json); the payload is rendered as text."""
    from reviewapp.models import Patch
    from reviewapp.services.comparisons import comparison_create

    fixed = Patch.objects.create(
        title="When stacked block devices are in-use (e.g. md or dm), the recursive calls",
        commit="d89d87965dcb" + "0" * 28, submitted_by=user)
    cmp = comparison_create(patch=fixed, baseline=list(seed_comparison.baseline_bundles.all()),
                            patched=list(seed_comparison.patched_bundles.all()), user=user)
    origin = live_server.url
    login(page, origin, user, password, "/upload/")
    assert page.locator("#fix-offers").count() == 0
    page.set_input_files("#id_mbox", str(DATA / "mbox" / "seed000_split_to_head.mbox"))
    page.wait_for_selector("#fix-offers-slot[data-loaded='1'] #fix-offers")
    offer = page.locator("#fix-offers")
    assert offer.locator(".fix-match").get_attribute("data-match") == "sha"
    assert "Fixes: d89d87965dcb" in offer.inner_text()
    radio = offer.locator(f"input[name=baseline_from][value='{cmp.pk}']")
    assert radio.count() == 1 and not radio.is_checked()
    assert offer.locator("input[name=baseline_from][value='']").is_checked()
    radio.check()
    assert page.locator("#upload-form input[name=baseline_from]:checked").get_attribute(
        "value") == str(cmp.pk)
    assert not page.dialogs
