"""Browser: Playwright driving Debian's chromium on a finished comparison page.

The comparison (kernel 6.1 vs 7.2 raid5 captures with manifests, policy under test
split_remainder=head) is built by the worker's own functions in this process and committed,
then served by the live server. The test asserts that every lazy section draws plotly charts
with data on both sides, that the device and stage selectors change what is drawn, and that
the report download and copy button deliver the text.
"""

from __future__ import annotations

import pytest

from tests.e2e.test_browser import CHROMIUM, CHROMIUM_ARGS

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SECTIONS = ("fragmentation", "seek", "throughput", "latency", "ordering", "model")


@pytest.fixture
def browser_context(monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(accept_downloads=True)
        try:
            yield context
        finally:
            browser.close()


def _drawn(page, section: str) -> dict:
    """Per drawn plot of a section: its side and the number of data points of its traces."""
    return page.evaluate("""(section) => {
        const out = [];
        document.querySelectorAll(`#section-${section} .plot[data-rendered='1']`).forEach(el => {
            const n = (el.data || []).reduce((a, t) => a + ((t.y || []).length), 0);
            out.push({chart: el.dataset.chart, side: el.dataset.side, points: n,
                      svg: el.querySelectorAll('.main-svg').length,
                      y: JSON.stringify((el.data || []).map(t => t.y))});
        });
        return out;
    }""", section)


def test_finished_comparison_renders_every_section(finished_comparison_committed, live_server,
                                                   browser_context):
    """Every section draws charts with data on both sides; selectors redraw; report works."""
    comparison = finished_comparison_committed
    origin = live_server.url
    browser_context.grant_permissions(["clipboard-read", "clipboard-write"], origin=origin)
    page = browser_context.new_page()
    page.set_default_timeout(30_000)
    page.goto(f"{origin}{comparison.get_absolute_url()}")
    page.wait_for_selector("#device-select")
    page.select_option("#device-select", "254,0")
    for section in SECTIONS:
        page.locator(f"#section-{section}").scroll_into_view_if_needed()
        page.wait_for_selector(f"#section-{section}[data-state='loaded']")
        drawn = _drawn(page, section)
        assert drawn, section
        sides = {d["side"] for d in drawn}
        assert {"baseline", "patched"} <= sides, (section, sides)
        assert all(d["points"] > 0 and d["svg"] > 0 for d in drawn), (section, drawn)
    model_sides = {d["side"] for d in _drawn(page, "model")}
    assert model_sides == {"baseline", "patched", "predicted_old", "predicted_new"}
    assert page.locator("#section-seek table.section-table").count() >= 1

    # the device selector changes what is drawn (md0's Q stream vs a member disk's D stream)
    page.locator("#section-seek").scroll_into_view_if_needed()
    before = _drawn(page, "seek")
    page.select_option("#device-select", "9,0")
    page.wait_for_selector("#section-seek[data-dev='9,0'][data-state='loaded']")
    after = _drawn(page, "seek")
    assert [d["y"] for d in after] != [d["y"] for d in before]
    assert page.locator("#stage-select").input_value() == "Q"

    # the stage selector too: md0's Q stream (100 bios) vs its C stream (400 completions)
    page.select_option("#stage-select", "C")
    page.wait_for_selector("#section-seek[data-dev='9,0'][data-stage='C'][data-state='loaded']")
    c_stage = _drawn(page, "seek")
    assert c_stage and [d["y"] for d in c_stage] != [d["y"] for d in after]
    title = page.locator("#section-seek .plot[data-side='baseline'] .gtitle").first.text_content()
    assert "(C stage)" in title

    # the report: the download returns the text, the copy button puts it in the clipboard
    page.locator("#report").scroll_into_view_if_needed()
    with page.expect_download() as info:
        page.click("#report-download")
    text = open(info.value.path(), encoding="utf-8").read()
    assert "Before this patch:" in text and "Read|Write seek" in text
    page.click("#report-copy")
    page.wait_for_function("document.getElementById('report-copy').dataset.copied")
    how = page.get_attribute("#report-copy", "data-copied")
    if how == "1":
        copied = page.evaluate("navigator.clipboard.readText()")
    else:
        copied = page.locator("#report-text").text_content()
    assert copied == text
