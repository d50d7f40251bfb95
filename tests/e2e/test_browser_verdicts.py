"""Browser: the summary in words, a fact's link to its chart, and the run selector (issue 9).

Three synthetic runs per side (one disk, D and C events; the patched side 15% slower with
run-to-run noise) are analyzed and compared by the worker's own functions in this process and
committed, then served by the live server to Debian's chromium driven by Playwright.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import finish_comparison
from tests.e2e.test_browser import chromium

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from synthetic_timing import timing_run_text  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def runs_comparison(transactional_db, user, make_upload):
    from reviewapp.models import Patch
    from reviewapp.services.bundles import bundle_create
    from reviewapp.services.comparisons import comparison_create

    def run(seed: int, slowdown: float) -> object:
        text = timing_run_text(seed, slowdown=slowdown, n=600).encode()
        bundle, _ = bundle_create(files=[make_upload(f"run{seed}.txt", text)], user=user)
        return bundle

    comparison = comparison_create(patch=Patch.objects.create(title="slower dispatch"),
                                   baseline=[run(i, 1.0) for i in range(3)],
                                   patched=[run(10 + i, 1 / 0.85) for i in range(3)], user=user)
    return finish_comparison(comparison)


@pytest.fixture
def browser_page(monkeypatch):
    with chromium(monkeypatch) as browser:
        page = browser.new_page()
        page.set_default_timeout(30_000)
        yield page


def _visible_mbps(page) -> dict:
    return page.evaluate("""() => {
        const rows = [...document.querySelectorAll("#section-throughput .charts[data-chart='mbps']")];
        const shown = rows.filter(r => !r.hidden);
        const plot = shown.length ? shown[0].querySelector(".plot[data-side='baseline']") : null;
        return {rows: rows.length, shown: shown.map(r => r.dataset.run),
                y: plot && plot.data ? JSON.stringify(plot.data.map(t => t.y)) : null};
    }""")


def test_summary_link_to_chart_and_run_switch(runs_comparison, live_server, browser_page):
    page = browser_page
    page.goto(f"{live_server.url}{runs_comparison.get_absolute_url()}")
    headline = page.locator("#summary-headline").inner_text()
    assert headline.startswith("mechanism: no watched change; timing: regressed: ")
    assert "MB/s" in headline and "Welch p=" in headline
    assert page.locator("#check-state").inner_text() == "fail"

    # a fact of the summary leads to its chart: the MB/s time series of the throughput section
    link = page.locator("#summary .fact-timing a.fact-link").first
    assert link.get_attribute("data-chart") == "mbps"
    link.click()
    page.wait_for_selector("body[data-followed='throughput|mbps']")
    target = page.locator("#section-throughput .charts.fact-target[data-chart='mbps']")
    assert target.count() == 1 and target.is_visible()
    page.wait_for_selector("#section-throughput .charts[data-run='0'] .plot[data-rendered='1']")
    first = _visible_mbps(page)
    assert first["rows"] == 3 and first["shown"] == ["0"] and first["y"]

    # the run selector shows another run's time series
    page.select_option("#run-select", "2")
    second = _visible_mbps(page)
    assert second["shown"] == ["2"] and second["y"] and second["y"] != first["y"]
    page.locator("#section-ordering").scroll_into_view_if_needed()
    page.wait_for_selector("#section-ordering[data-state='loaded']")
    shown = page.evaluate("""() => [...document.querySelectorAll(
        "#section-ordering .charts[data-chart='lba']")].filter(r => !r.hidden)
        .map(r => r.dataset.run)""")
    assert shown == ["2"]


def test_upload_form_preselects_the_presets_difference_and_builds_a_stack(
        transactional_db, live_server, user, password, browser_page):
    """Typing both kernels preselects what their presets differ in; the builder writes the
    stack spec."""
    page = browser_page
    page.goto(f"{live_server.url}/accounts/login/?next=/upload/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/upload/")
    page.fill("#id_baseline_kernel", "6.17.13")
    page.fill("#id_patched_kernel", "6.18.15")
    page.locator("#id_patched_kernel").dispatch_event("change")
    page.wait_for_selector("#field-policy_choices[data-preselected='2']")
    checked = page.eval_on_selector_all("input[name=policy_choices]:checked",
                                        "els => els.map(e => e.value)")
    assert sorted(checked) == ["dio_bio_limit=pages@6.18", "split_remainder=head@6.18"]
    page.select_option("#sb-kind", "raid0")
    page.fill("#sb-disks", "2")
    page.fill("#sb-chunk", "64k")
    page.select_option("#sb-device", "sata_ssd")
    page.click("#sb-write")
    assert page.input_value("#id_stack") == "raid0:disks=2,chunk=64k,device=sata_ssd"


def _point_xy(page, run: str, side: str, index: int) -> dict:
    """Page coordinates of the ``index``-th point of the first trace of an LBA panel."""
    page.locator(f"#section-ordering .charts[data-chart='lba'][data-run='{run}'] "
                 f".plot[data-side='{side}']").scroll_into_view_if_needed()
    return page.evaluate("""([run, side, i]) => {
        const plot = document.querySelector(
            `#section-ordering .charts[data-chart='lba'][data-run='${run}'] .plot[data-side='${side}']`);
        const fl = plot._fullLayout, tr = plot.data[0], box = plot.getBoundingClientRect();
        return {x: box.left + fl._size.l + fl.xaxis.l2p(tr.x[i]),
                y: box.top + fl._size.t + fl.yaxis.l2p(tr.y[i]), sector: tr.y[i]};
    }""", [run, side, index])


def test_click_on_an_lba_point_opens_the_request_story_timeline(runs_comparison, live_server,
                                                               browser_page):
    """Lineage on the page: clicking a point of the LBA scatter opens that request's story as
    a plotly timeline (its events in time order, plotly served from the app's static files)
    under the chart; another run's point opens that run's request."""
    page = browser_page
    page.goto(f"{live_server.url}{runs_comparison.get_absolute_url()}")
    page.locator("#section-ordering").scroll_into_view_if_needed()
    page.wait_for_selector("#section-ordering[data-state='loaded']")
    page.wait_for_selector("#section-ordering .charts[data-chart='lba'][data-run='0'] "
                           ".plot[data-side='baseline'][data-rendered='1']")
    assert "Pick a point of the LBA chart" in page.locator("#request-story").inner_text()
    p = _point_xy(page, "0", "baseline", 0)
    page.mouse.move(p["x"], p["y"])
    page.mouse.click(p["x"], p["y"])
    page.wait_for_selector("#request-story .story-plot[data-rendered='1']")
    story = page.locator("#request-story")
    assert story.get_attribute("data-side") == "baseline" and story.get_attribute("data-run") == "0"
    assert story.get_attribute("data-request").startswith(f"{p['sector']} + ")
    events = page.evaluate("""() => document.querySelector("#request-story .story-plot")
        .data[0].text""")
    assert events == ["D", "C"]  # these synthetic runs trace D and C only
    xs = page.evaluate("""() => document.querySelector("#request-story .story-plot").data[0].x""")
    assert xs[0] == 0 and xs == sorted(xs) and xs[-1] > 0
    srcs = page.eval_on_selector_all("script[src]", "els => els.map(e => e.src)")
    assert all(s.startswith(live_server.url) for s in srcs)  # plotly served locally, no CDN

    # another run: its chart's point opens that run's request
    page.select_option("#run-select", "1")
    p1 = _point_xy(page, "1", "patched", 0)
    page.mouse.move(p1["x"], p1["y"])
    page.mouse.click(p1["x"], p1["y"])
    page.wait_for_selector("#request-story[data-run='1'][data-side='patched'] "
                           ".story-plot[data-rendered='1']")
    assert page.locator("#request-story").get_attribute("data-request").startswith(
        f"{p1['sector']} + ")


def test_click_on_a_seek_bar_opens_a_request_of_that_distance(runs_comparison, live_server,
                                                            browser_page):
    """A bar of the D-stage seek histogram opens the story of a stored request whose seek
    distance falls in that bucket."""
    page = browser_page
    page.goto(f"{live_server.url}{runs_comparison.get_absolute_url()}")
    page.locator("#section-seek").scroll_into_view_if_needed()
    page.wait_for_selector("#section-seek[data-state='loaded']")
    sel = "#section-seek .charts[data-chart='seek'] .plot[data-side='baseline']"
    page.wait_for_selector(sel + "[data-rendered='1']")
    page.locator(sel).scroll_into_view_if_needed()
    bar = page.evaluate("""(sel) => {
        const plot = document.querySelector(sel);
        const fl = plot._fullLayout, tr = plot.data[0], box = plot.getBoundingClientRect();
        const i = tr.y.indexOf(Math.max(...tr.y));
        return {i: i, x: box.left + fl._size.l + fl.xaxis.d2p(tr.x[i]),
                y: box.top + fl._size.t + fl.yaxis.l2p(tr.y[i] / 2)};
    }""", sel)
    page.mouse.move(bar["x"], bar["y"])
    page.mouse.click(bar["x"], bar["y"])
    page.wait_for_selector(f"#seek-story[data-bucket='{bar['i']}'] .story-plot[data-rendered='1']")
    assert page.locator("#seek-story").get_attribute("data-side") == "baseline"
    assert page.locator("#seek-story .story-title").inner_text().startswith("Story of ")
