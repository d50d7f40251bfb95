"""Browser: Playwright driving Debian's chromium on a finished comparison page.

The comparison (kernel 6.1 vs 7.2 raid5 captures with manifests, policy under test
split_remainder=head) is built by the worker's own functions in this process and committed,
then served by the live server. The test asserts that every lazy section draws plotly charts
with data on both sides, that the device and stage selectors change what is drawn, and that
the report download and copy button deliver the text.
"""

from __future__ import annotations

import pytest

from tests.e2e.test_browser import chromium

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SECTIONS = ("fragmentation", "seek", "throughput", "latency", "ordering", "model")


@pytest.fixture
def browser_context(monkeypatch):
    with chromium(monkeypatch) as browser:
        yield browser.new_context(accept_downloads=True)


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


def _state(page) -> dict:
    return page.evaluate("""() => ({
        hash: window.location.hash,
        dev: document.getElementById('device-select').value,
        stage: document.getElementById('stage-select').value,
        seekDev: document.getElementById('section-seek').dataset.dev,
        seekStage: document.getElementById('section-seek').dataset.stage,
        note: (document.querySelector('#section-seek .stage-note') || {}).textContent || '',
    })""")


def _seek_row(page, label: str) -> list[str]:
    return page.evaluate("""(label) => {
        const row = [...document.querySelectorAll('#section-seek table.section-table tbody tr')]
            .find(tr => tr.firstChild.textContent.startsWith(label));
        return row ? [...row.children].map(td => td.textContent) : [];
    }""", label)


def test_device_stage_and_section_live_in_the_address(finished_comparison_committed,
                                                     live_server, browser_context):
    """'vdc at Q, seek' is a link: the address selects the device, the stage and the
    section; switching device or stage rewrites the address, and a reload restores it. The stage
    note names the selected stage and the zero-seek share is filled at a non-default stage."""
    url = f"{live_server.url}{finished_comparison_committed.get_absolute_url()}"
    page = browser_context.new_page()
    page.set_default_timeout(30_000)
    page.goto(f"{url}#dev=254,32&stage=Q&section=seek")
    page.wait_for_selector("#section-seek[data-dev='254,32'][data-stage='Q'][data-state='loaded']")
    st = _state(page)
    assert st["dev"] == "254,32" and st["stage"] == "Q", st
    assert "stage Q" in st["note"] and "stage D" not in st["note"].split("default")[0], st
    zero = _seek_row(page, "Zero-seek share")
    assert zero and zero[1] != "–" and zero[2] != "–", zero

    # switching the device rewrites the address (the stage goes back to the device's default)
    page.select_option("#device-select", "9,0")
    page.wait_for_selector("#section-seek[data-dev='9,0'][data-state='loaded']")
    st = _state(page)
    assert "dev=9,0" in st["hash"] and "stage=" not in st["hash"], st
    assert "stage Q" in st["note"], st  # md0's default stage (no D events)
    page.select_option("#stage-select", "C")
    page.wait_for_selector("#section-seek[data-dev='9,0'][data-stage='C'][data-state='loaded']")
    st = _state(page)
    assert "dev=9,0" in st["hash"] and "stage=C" in st["hash"] and "section=seek" in st["hash"]
    assert "stage C" in st["note"] and "stage Q (" not in st["note"], st
    link = page.get_attribute("#section-seek .section-link", "href")
    assert link == st["hash"]

    # the address alone restores the view in a fresh page
    fresh = browser_context.new_page()
    fresh.set_default_timeout(30_000)
    fresh.goto(f"{url}{st['hash']}")
    fresh.wait_for_selector("#section-seek[data-dev='9,0'][data-stage='C'][data-state='loaded']")
    assert _state(fresh)["stage"] == "C"


def test_all_members_view_lba_zoom_and_chart_anchor(finished_comparison_committed, live_server,
                                                    browser_context):
    """The all-members view of md0 draws every member; the LBA plots are zoomed per side with
    a toggle to one shared range; an address with chart and side outlines that panel."""
    url = f"{live_server.url}{finished_comparison_committed.get_absolute_url()}"
    page = browser_context.new_page()
    page.set_default_timeout(30_000)
    page.goto(f"{url}#dev=members:9,0&section=ordering&chart=lba&side=patched")
    page.wait_for_selector("#section-ordering[data-dev='members:9,0'][data-state='loaded']")
    assert page.input_value("#device-select") == "members:9,0"
    assert "all members of" in page.locator("#device-select option:checked").text_content()
    lba = "#section-ordering .plot[data-chart='lba']"
    page.wait_for_selector(f"{lba}[data-side='patched'].anchored")
    ranges = page.evaluate("""(sel) => [...document.querySelectorAll(sel)].map(
        p => p.layout.yaxis.range.map(Math.round))""", lba)
    assert len(ranges) == 2
    page.check("#section-ordering input.shared-range")
    page.wait_for_function("""(sel) => { const r = [...document.querySelectorAll(sel)]
        .map(p => JSON.stringify(p.layout.yaxis.range)); return r[0] === r[1]; }""", arg=lba)
    shared = page.evaluate("""(sel) => [...document.querySelectorAll(sel)].map(
        p => p.layout.yaxis.range.map(Math.round))""", lba)
    assert shared[0] == shared[1]
    assert shared[0][0] <= min(r[0] for r in ranges) and shared[0][1] >= max(r[1] for r in ranges)
    # eight members' requests on each side (50 per member)
    n = page.evaluate("""(sel) => [...document.querySelectorAll(sel)].map(p => p.data
        .filter(t => t.name !== 'backward step').reduce((a, t) => a + t.y.length, 0))""", lba)
    assert n == [400, 400]
