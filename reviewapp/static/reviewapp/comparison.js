/* Comparison page.
   - Before the comparison step: draw the inline plotly figures (reviewapp/charts.py) and poll
     the progress JSON; reload when the observed results or the comparison step are done.
   - After it: lazy sections. Each .lazy-section fetches its precomputed JSON
     (reviewapp/sections.py, stored by the worker) when it scrolls into view, for the device of
     #device-select (and, for seek, the stage of #stage-select), and draws its charts side by
     side with plotly (served from the app's static files), its tables and its texts.
   - The report: download link, and a copy button that puts the text in the clipboard (or
     shows it for manual copying when the clipboard is not available). */
(function () {
  "use strict";
  var PLOT_CONFIG = {displaylogo: false, responsive: true};

  /* A chart of lines only (throughput, IOPS over time) gets a box-select button too, which
     plotly offers only for markers: selecting a time window anchors a thread on it
     (threads.js, plotly_selected; the range is what counts, the selected points do not). */
  function plotConfig(fig) {
    var lines = (fig.data || []).length && (fig.data || []).every(function (t) {
      return (t.type || "scatter") === "scatter" && String(t.mode || "") === "lines";
    });
    if (!lines) { return PLOT_CONFIG; }
    var select = {name: "select-window", title: "Select a time window (to start a thread on it)",
                  icon: Plotly.Icons.selectbox, attr: "dragmode", val: "select",
                  click: function (gd) { Plotly.relayout(gd, {dragmode: "select"}); }};
    return Object.assign({modeBarButtonsToAdd: [select]}, PLOT_CONFIG);
  }

  function drawFigures() {
    var node = document.getElementById("figures-data");
    if (!node || typeof Plotly === "undefined") { return; }
    var figures = JSON.parse(node.textContent);
    document.querySelectorAll(".plot[data-figure]").forEach(function (el) {
      var fig = figures[el.dataset.figure];
      if (!fig) { el.classList.add("empty"); el.textContent = "no data on this side"; return; }
      Plotly.newPlot(el, fig.data, fig.layout, PLOT_CONFIG)
        .then(function () { el.dataset.rendered = "1"; });
    });
  }

  function renderJobs(list, jobs) {
    list.innerHTML = "";
    jobs.forEach(function (j) {
      var li = document.createElement("li");
      li.className = "job job-" + j.state;
      li.dataset.side = j.side;
      var text = j.side + " bundle #" + j.bundle + ": " + j.state;
      if (j.message && j.state !== "succeeded") { text += " (" + j.message + ")"; }
      li.textContent = text;
      if (j.error) {
        var span = document.createElement("span");
        span.className = "job-error";
        span.textContent = j.error;
        li.appendChild(document.createTextNode(": "));
        li.appendChild(span);
      }
      list.appendChild(li);
    });
  }

  function poll() {
    var box = document.getElementById("status");
    if (!box || box.dataset.complete === "1") { return; }
    fetch(box.dataset.progressUrl, {headers: {"Accept": "application/json"}})
      .then(function (r) { return r.json(); })
      .then(function (p) {
        document.getElementById("status-text").textContent = p.status;
        document.getElementById("status-progress").value = p.progress;
        document.getElementById("status-pct").textContent = p.progress + "%";
        box.className = "status-box status-" + p.status;
        renderJobs(document.getElementById("job-list"), p.jobs);
        if (p.complete) {
          box.dataset.complete = "1";
          window.location.reload();
        } else if (p.done && box.dataset.done === "0") {
          box.dataset.done = "1";
          if (p.status === "ready") { window.location.reload(); }
          window.setTimeout(poll, 1000);
        } else {
          window.setTimeout(poll, 1000);
        }
      })
      .catch(function () { window.setTimeout(poll, 3000); });
  }

  /* --- lazy sections ------------------------------------------------------------------ */

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = text; }
    return e;
  }

  /* --- the page's address: #dev=254,32&stage=Q&section=seek (docs/urls.md) -------------
     dev (major,minor, a device name such as vdc, or members:9,0), stage (seek section), section,
     and for anchors on a chart: chart (its id), side, x=lo,hi and y=lo,hi (axis units). */
  var ADDRESS_KEYS = ["dev", "stage", "section", "chart", "side", "x", "y"];

  function readAddress() {
    /* the same keys in the query (?dev=...&section=..., the thread links' form) count too;
       the fragment wins */
    var query = new URLSearchParams(window.location.search);
    var params = new URLSearchParams(window.location.hash.replace(/^#/, ""));
    var out = {};
    ADDRESS_KEYS.forEach(function (k) {
      var v = params.get(k) || query.get(k);
      if (v) { out[k] = v; }
    });
    return out;
  }

  function addressHash(state) {
    var parts = [];
    ADDRESS_KEYS.forEach(function (k) {
      if (state[k]) { parts.push(k + "=" + encodeURIComponent(state[k]).replace(/%2C/g, ",").replace(/%3A/g, ":")); }
    });
    return parts.length ? "#" + parts.join("&") : "";
  }

  /* the current selection as an address; `section` given: a link to that section */
  function currentAddress(section) {
    var state = {dev: currentDevice()};
    var st = document.getElementById("stage-select");
    if (section) { state.section = section; }
    if ((!section || section === "seek") && st && st.value && st.value !== st.dataset.defaultStage) {
      state.stage = st.value;
    }
    return state;
  }

  function writeAddress(state) {
    var hash = addressHash(state);
    if (hash !== window.location.hash) {
      window.history.replaceState(null, "", window.location.pathname + window.location.search + hash);
    }
    updateSectionLinks();
  }

  function updateSectionLinks() {
    document.querySelectorAll(".section-link").forEach(function (a) {
      a.href = addressHash(currentAddress(a.dataset.section));
    });
  }

  /* the option of #device-select an address names: its value, or a device name */
  function deviceOption(name) {
    var sel = document.getElementById("device-select");
    if (!sel || !name) { return null; }
    var found = null;
    Array.prototype.forEach.call(sel.options, function (o) {
      if (!found && (o.value === name || o.value === name.replace(":", ",") && name.indexOf("members") < 0 ||
                     o.dataset.name === name)) { found = o; }
    });
    return found;
  }

  var wantedStage = "";
  var wantedAnchor = null;

  function currentDevice() {
    var sel = document.getElementById("device-select");
    return sel ? sel.value : "";
  }

  function currentRun() {
    var sel = document.getElementById("run-select");
    return sel ? sel.value : "0";
  }

  function showRun() {
    var run = currentRun();
    document.querySelectorAll(".charts[data-run]").forEach(function (row) {
      var show = row.dataset.run === run;
      row.hidden = !show;
      if (show) {
        row.querySelectorAll(".plot[data-rendered]").forEach(function (p) {
          if (window.Plotly && Plotly.Plots) { Plotly.Plots.resize(p); }
        });
      }
    });
  }

  function sectionUrl(section) {
    var params = new URLSearchParams();
    var dev = currentDevice();
    if (dev) { params.set("dev", dev); }
    if (section.dataset.section === "seek") {
      var st = document.getElementById("stage-select");
      if (st && st.value) { params.set("stage", st.value); } else if (wantedStage) { params.set("stage", wantedStage); }
    }
    return section.dataset.url + "?" + params.toString();
  }

  function renderTable(t) {
    var wrap = el("div", "table-wrap");
    wrap.appendChild(el("h4", null, t.title));
    var table = el("table", "numbers section-table");
    table.dataset.table = t.id;
    var thead = el("thead"), tr = el("tr");
    t.columns.forEach(function (c) { tr.appendChild(el("th", null, c)); });
    thead.appendChild(tr);
    table.appendChild(thead);
    var tbody = el("tbody");
    t.rows.forEach(function (row) {
      var r = el("tr");
      row.forEach(function (cell, i) {
        var td = el(i === 0 ? "th" : "td", null, cell === null ? "–" : String(cell));
        if (t.columns[i] === "Verdict" && cell) {
          td.className = "verdict verdict-" + String(cell).split(" ")[0].replace(/[^a-z]/gi, "");
        }
        r.appendChild(td);
      });
      tbody.appendChild(r);
    });
    table.appendChild(tbody);
    wrap.appendChild(table);
    return wrap;
  }

  function renderSection(section, data) {
    var body = section.querySelector(".section-body");
    body.innerHTML = "";
    section.dataset.dev = data.dev || "";
    section.dataset.stage = data.stage || "";
    if (data.section === "seek") { fillStages(data); }
    if (data.stage_note) {
      body.appendChild(el("p", "small stage-note", "Baseline: " + (data.stage_note.baseline || "no events") +
        " · patched: " + (data.stage_note.patched || "no events")));
    }
    if (data.error) { body.appendChild(el("p", "model-error job-error", data.error)); }
    (data.notes || []).forEach(function (n) { body.appendChild(el("p", "small note", n)); });
    var pending = [];
    (data.charts || []).forEach(function (chart) {
      var row = el("div", "sides charts n" + chart.panels.length);
      row.dataset.chart = chart.id;
      if (chart.run !== undefined) {
        /* one chart per run (LBA, time series): the run selector shows one of them */
        row.dataset.run = String(chart.run);
        row.hidden = String(chart.run) !== currentRun();
      }
      if (chart.shared_y && !chart.run) {
        /* each side is zoomed to its own data; the toggle puts both on the range of both */
        var lab = el("label", "small range-toggle");
        var box = el("input");
        box.type = "checkbox";
        box.className = "shared-range";
        box.dataset.chart = chart.id;
        lab.appendChild(box);
        lab.appendChild(document.createTextNode(" " + (chart.toggle || "same range on both sides")));
        box.addEventListener("change", function () {
          /* every run's chart of this id (the run selector shows one at a time) */
          body.querySelectorAll(".charts[data-chart='" + chart.id + "'] .plot[data-rendered='1']").forEach(function (plot) {
            var range = box.checked ? JSON.parse(plot.dataset.sharedY || "null") : JSON.parse(plot.dataset.ownY || "null");
            if (range) { Plotly.relayout(plot, {"yaxis.range": range}); }
          });
        });
        body.appendChild(lab);
      }
      chart.panels.forEach(function (panel) {
        var side = el("div", "side " + panel.side);
        var plot = el("div", "plot");
        plot.dataset.chart = chart.id;
        plot.dataset.side = panel.side;
        side.appendChild(plot);
        row.appendChild(side);
        if (!panel.figure) {
          /* nothing to draw on this side: a titled note, never empty axes */
          plot.classList.add("empty");
          plot.dataset.empty = "1";
          plot.appendChild(el("div", "empty-title", panel.title || panel.label));
          plot.appendChild(el("div", "empty-note", panel.empty || "no data"));
          return;
        }
        var yr = ((panel.figure.layout || {}).yaxis || {}).range;
        if (yr) { plot.dataset.ownY = JSON.stringify(yr); }
        if (chart.shared_y) { plot.dataset.sharedY = JSON.stringify(chart.shared_y); }
        pending.push([plot, panel.figure]);
      });
      body.appendChild(row);
    });
    (data.tables || []).forEach(function (t) {
      if (!t.collapsed) { body.appendChild(renderTable(t)); return; }
      /* detail one click below (a member disk under its array's roll-up) */
      var det = el("details", "table-detail");
      det.dataset.table = t.id;
      det.appendChild(el("summary", null, t.title));
      det.appendChild(renderTable(t));
      body.appendChild(det);
    });
    if (data.text && Object.keys(data.text).length) {
      var det = el("details", "section-text");
      det.appendChild(el("summary", null, data.section === "seek" ?
        "As text (seed 000 layout)" : "First requests in issue order"));
      var sides = el("div", "sides");
      ["baseline", "patched"].forEach(function (s) {
        if (data.text[s] === undefined) { return; }
        var d = el("div", "side " + s);
        d.appendChild(el("pre", null, data.text[s]));
        sides.appendChild(d);
      });
      det.appendChild(sides);
      body.appendChild(det);
    }
    if (!pending.length && !(data.tables || []).length && !(data.notes || []).length) {
      body.appendChild(el("p", "small", "No data for this device."));
    }
    var draws = pending.map(function (p) {
      return Plotly.newPlot(p[0], p[1].data, p[1].layout, plotConfig(p[1]))
        .then(function () { p[0].dataset.rendered = "1"; });
    });
    return Promise.all(draws).then(function () {
      section.dataset.loaded = currentDevice() + "|" + (data.stage || "");
      /* other scripts (story.js) add to a section once its charts are drawn */
      section.dispatchEvent(new CustomEvent("blkreview:section-rendered",
        {bubbles: true, detail: {section: section, data: data}}));
      section.dataset.state = "loaded";
      applyAnchor(section);
    });
  }

  function fillStages(data) {
    var sel = document.getElementById("stage-select");
    if (!sel) { return; }
    var wanted = data.stage || data.default_stage;
    sel.dataset.defaultStage = data.default_stage || "";
    wantedStage = "";
    var have = Array.prototype.map.call(sel.options, function (o) { return o.value; }).join(",");
    if (have !== (data.stages || []).join(",")) {
      sel.innerHTML = "";
      (data.stages || []).forEach(function (st) {
        var o = el("option", null, st + (st === data.default_stage ? " (default)" : ""));
        o.value = st;
        sel.appendChild(o);
      });
    }
    sel.value = wanted;
  }

  function loadSection(section) {
    var url = sectionUrl(section);
    if (section.dataset.url_loading === url) { return; }
    section.dataset.url_loading = url;
    section.dataset.state = "loading";
    fetch(url, {headers: {"Accept": "application/json"}, credentials: "same-origin"})
      .then(function (r) {
        if (r.status === 202) { throw new Error("not computed yet"); }
        if (!r.ok) { return r.json().then(function (j) { throw new Error(j.error || r.status); }); }
        return r.json();
      })
      .then(function (data) { return renderSection(section, data); })
      .catch(function (err) {
        section.dataset.state = "error";
        var body = section.querySelector(".section-body");
        body.innerHTML = "";
        body.appendChild(el("p", "job-error", "Could not load this section: " + err.message));
      })
      .then(function () { section.dataset.url_loading = ""; });
  }

  function visible(section) {
    var r = section.getBoundingClientRect();
    return r.top < window.innerHeight + 200 && r.bottom > -200;
  }

  function setupLazy() {
    var sections = document.querySelectorAll(".lazy-section");
    if (!sections.length) { return; }
    var observer = null;
    if ("IntersectionObserver" in window) {
      observer = new IntersectionObserver(function (entries) {
        entries.forEach(function (e) {
          if (e.isIntersecting && e.target.dataset.state !== "loaded") { loadSection(e.target); }
        });
      }, {rootMargin: "200px"});
      sections.forEach(function (s) { observer.observe(s); });
    } else {
      sections.forEach(loadSection);
    }
    var dev = document.getElementById("device-select");
    var reloadAll = function () {
      var stage = document.getElementById("stage-select");
      if (stage) { stage.value = ""; stage.innerHTML = ""; }
      sections.forEach(function (s) {
        s.dataset.state = "stale";
        if (visible(s)) { loadSection(s); }
      });
    };
    if (dev) {
      dev.addEventListener("change", function () {
        wantedStage = "";
        reloadAll();
        var a = readAddress();
        writeAddress({dev: dev.value, section: a.section});
      });
    }
    var runSel = document.getElementById("run-select");
    if (runSel) { runSel.addEventListener("change", showRun); }
    var stage = document.getElementById("stage-select");
    if (stage) {
      stage.addEventListener("change", function () {
        loadSection(document.getElementById("section-seek"));
        writeAddress(currentAddress("seek"));
      });
    }
    window.addEventListener("hashchange", function () {
      if (applyAddress()) { reloadAll(); }
    });
    // open a section from the address bar (#section-latency) or by clicking its heading
    sections.forEach(function (s) {
      s.querySelector("h2").addEventListener("click", function () { loadSection(s); });
    });
  }

  /* select what the address names; true when the device changed */
  function applyAddress() {
    var a = readAddress();
    var changed = false;
    var dev = document.getElementById("device-select");
    var opt = deviceOption(a.dev);
    if (dev && opt && dev.value !== opt.value) { dev.value = opt.value; changed = true; }
    wantedStage = a.stage ? a.stage.toUpperCase() : "";
    var st = document.getElementById("stage-select");
    if (st && wantedStage && st.value !== wantedStage) {
      st.value = ""; st.innerHTML = "";
      var seek = document.getElementById("section-seek");
      if (seek && !changed) { seek.dataset.state = "stale"; loadSection(seek); }
    }
    wantedAnchor = a.chart ? a : null;
    var target = a.section && document.getElementById("section-" + a.section);
    if (target) {
      target.scrollIntoView();
      if (target.dataset.state !== "loaded" && !changed) { loadSection(target); }
      else if (target.dataset.state === "loaded") { applyAnchor(target); }
    }
    updateSectionLinks();
    return changed;
  }

  /* an address with chart (and side, x, y): outline that panel and zoom it to the region */
  function applyAnchor(section) {
    var a = wantedAnchor;
    if (!a || (a.section && section.dataset.section !== a.section)) { return; }
    var sel = ".plot[data-chart='" + a.chart + "']" + (a.side ? "[data-side='" + a.side + "']" : "");
    var plot = section.querySelector(sel);
    if (!plot) { return; }
    document.querySelectorAll(".plot.anchored").forEach(function (p) { p.classList.remove("anchored"); });
    plot.classList.add("anchored");
    var upd = {};
    ["x", "y"].forEach(function (axis) {
      var r = (a[axis] || "").split(",").map(Number);
      if (r.length === 2 && !isNaN(r[0]) && !isNaN(r[1])) { upd[axis + "axis.range"] = r; }
    });
    if (Object.keys(upd).length && plot.dataset.rendered === "1") { Plotly.relayout(plot, upd); }
    plot.scrollIntoView({block: "center"});
    wantedAnchor = null;
  }

  function setupReport() {
    var btn = document.getElementById("report-copy");
    if (!btn) { return; }
    btn.addEventListener("click", function () {
      var status = document.getElementById("report-status");
      var pre = document.getElementById("report-text");
      fetch(btn.dataset.url, {credentials: "same-origin"})
        .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.text(); })
        .then(function (text) {
          pre.textContent = text;
          var done = function () { status.textContent = "Copied to the clipboard."; btn.dataset.copied = "1"; };
          var show = function () {
            pre.hidden = false;
            status.textContent = "The clipboard is not available here: the report is shown below.";
            btn.dataset.copied = "shown";
          };
          if (navigator.clipboard && navigator.clipboard.writeText) {
            return navigator.clipboard.writeText(text).then(done, show);
          }
          show();
        })
        .catch(function (err) { status.textContent = "Could not fetch the report: " + err.message; });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    drawFigures();
    applyAddress();
    setupLazy();
    setupReport();
    poll();
  });
}());
