/* Anchored threads (issue 8), apart from comparison.js.
   - Comparison page: clicking a chart bar or point (plotly_click) or box-selecting a time
     window (plotly_selected) anchors the new-thread form on that chart region; the 💬 button
     of a metric row (tables of the lazy sections) anchors it on the row. The anchor uses the
     page's addresses: device (dev), stage, section.
   - A thread's anchor link (and ?anchor=<thread id> in the address) brings the anchor back:
     selects the device and stage, loads the section, scrolls to it and highlights the chart
     row (hovering the bucket; a time-window anchor is drawn as a shaded band x0..x1 on its
     panel) or the metric row.
   - Patch page: each diff line gets a 💬 button anchoring the form on that line.
   Nothing here builds HTML from text: every label is set with textContent. */
(function () {
  "use strict";

  function $(sel, root) { return (root || document).querySelector(sel); }
  function $all(sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); }

  function button(label, title, cls) {
    var b = document.createElement("button");
    b.type = "button";
    b.className = cls;
    b.title = title;
    b.textContent = label;
    return b;
  }

  /* --- the new-thread form ------------------------------------------------------------- */
  function setAnchor(anchor, label) {
    var form = $("#new-thread-form");
    if (!form) { return; }
    $("#new-thread-kind").value = anchor.kind;
    var a = Object.assign({}, anchor);
    delete a.kind;
    $("#new-thread-anchor").value = JSON.stringify(a);
    var p = $("#new-thread-anchor-label");
    p.textContent = "On " + label;
    p.hidden = false;
    form.dataset.anchorKind = anchor.kind;
    $("#new-thread-clear").hidden = false;
    form.scrollIntoView({block: "center"});
    $("#new-thread-body").focus();
  }

  function clearAnchor() {
    var form = $("#new-thread-form");
    $("#new-thread-kind").value = "comparison";
    $("#new-thread-anchor").value = "";
    $("#new-thread-anchor-label").hidden = true;
    $("#new-thread-clear").hidden = true;
    form.dataset.anchorKind = "";
  }

  function sectionOf(el) { return el.closest(".lazy-section"); }

  function where(section) {
    var dev = section.dataset.dev || "";
    var stage = section.dataset.stage || "";
    return dev + (stage ? " at " + stage : "") + ", " + section.dataset.section;
  }

  /* --- chart regions ------------------------------------------------------------------- */
  function otherSideValue(plot, x) {
    /* the y of the same x on the other side's panel of the same chart, if drawn */
    var out = {};
    $all(".plot[data-chart='" + plot.dataset.chart + "']", plot.closest(".charts")).forEach(function (p) {
      (p.data || []).slice(0, 1).forEach(function (trace) {
        var xs = trace.x || [];
        for (var i = 0; i < xs.length; i++) {
          if (String(xs[i]) === String(x)) {
            var y = (trace.y || [])[i];
            if (typeof y === "number" && isFinite(y)) { out[p.dataset.side] = y; }
            break;
          }
        }
      });
    });
    return out;
  }

  function hookPlot(plot) {
    if (plot.dataset.threadHooked || typeof plot.on !== "function") { return; }
    plot.dataset.threadHooked = "1";
    plot.on("plotly_click", function (ev) {
      if (!$("#new-thread-form") || !ev || !ev.points || !ev.points.length) { return; }
      var pt = ev.points[0];
      var section = sectionOf(plot);
      if (!section) { return; }
      var values = otherSideValue(plot, pt.x);
      if (typeof pt.y === "number" && !(plot.dataset.side in values)) { values[plot.dataset.side] = pt.y; }
      var anchor = {kind: "chart", section: section.dataset.section, dev: section.dataset.dev || "",
                    stage: section.dataset.stage || "", chart: plot.dataset.chart,
                    side: plot.dataset.side, bucket: String(pt.x).slice(0, 80), values: values};
      setAnchor(anchor, where(section) + " / " + plot.dataset.chart + ": bucket " + anchor.bucket);
    });
    plot.on("plotly_selected", function (ev) {
      if (!$("#new-thread-form") || !ev || !ev.range || !ev.range.x) { return; }
      var section = sectionOf(plot);
      var x0 = Number(ev.range.x[0]), x1 = Number(ev.range.x[1]);
      if (!section || !isFinite(x0) || !isFinite(x1)) { return; }
      var anchor = {kind: "chart", section: section.dataset.section, dev: section.dataset.dev || "",
                    stage: section.dataset.stage || "", chart: plot.dataset.chart,
                    side: plot.dataset.side, x0: x0, x1: x1};
      setAnchor(anchor, where(section) + " / " + plot.dataset.chart + ": window " +
                x0.toPrecision(4) + ".." + x1.toPrecision(4));
    });
  }

  /* --- metric rows --------------------------------------------------------------------- */
  function hookRows(section) {
    $all("table.section-table tbody tr", section).forEach(function (tr) {
      if (tr.dataset.threadHooked) { return; }
      tr.dataset.threadHooked = "1";
      var first = tr.firstElementChild;
      if (!first) { return; }
      var metric = first.textContent;
      tr.dataset.metric = metric;
      if (!$("#new-thread-form")) { return; }
      var b = button("💬", "Start a thread on this row", "thread-row-btn");
      b.addEventListener("click", function () {
        var s = sectionOf(tr);
        setAnchor({kind: "metric", section: s.dataset.section, dev: s.dataset.dev || "",
                   stage: s.dataset.stage || "", metric: metric}, where(s) + ", " + metric);
      });
      first.appendChild(document.createTextNode(" "));
      first.appendChild(b);
    });
  }

  function hookSection(section) {
    $all(".plot[data-rendered='1']", section).forEach(hookPlot);
    hookRows(section);
  }

  function watchSections() {
    $all(".lazy-section").forEach(function (section) {
      hookSection(section);
      new MutationObserver(function () { hookSection(section); })
        .observe(section, {subtree: true, childList: true, attributes: true,
                           attributeFilter: ["data-rendered", "data-state"]});
    });
  }

  /* --- going back to an anchor --------------------------------------------------------- */
  function waitFor(test, timeoutMs) {
    return new Promise(function (resolve, reject) {
      var t0 = Date.now();
      (function tick() {
        var v = test();
        if (v) { resolve(v); return; }
        if (Date.now() - t0 > timeoutMs) { reject(new Error("timeout")); return; }
        window.setTimeout(tick, 100);
      })();
    });
  }

  function highlight(el) {
    $all(".anchor-highlight").forEach(function (x) { x.classList.remove("anchor-highlight"); });
    el.classList.add("anchor-highlight");
    el.scrollIntoView({block: "center"});
  }

  function selectValue(sel, value) {
    if (!sel || !value || sel.value === value) { return false; }
    if (!$all("option", sel).some(function (o) { return o.value === value; })) { return false; }
    sel.value = value;
    sel.dispatchEvent(new Event("change"));
    return true;
  }

  function jumpTo(anchor) {
    var section = document.getElementById("section-" + anchor.section);
    if (!section) { return Promise.resolve(false); }
    selectValue($("#device-select"), anchor.dev);
    section.scrollIntoView({block: "start"});
    var loaded = function () {
      return section.dataset.state === "loaded" && (!anchor.dev || section.dataset.dev === anchor.dev);
    };
    if (!loaded()) { var h = $("h2", section); if (h) { h.click(); } }
    return waitFor(loaded, 20000).then(function () {
      if (anchor.stage && section.dataset.stage !== anchor.stage &&
          selectValue($("#stage-select"), anchor.stage)) {
        return waitFor(function () { return section.dataset.state === "loaded" &&
                                            section.dataset.stage === anchor.stage; }, 20000);
      }
      return true;
    }).then(function () {
      hookSection(section);
      var target = null;
      if (anchor.kind === "metric") {
        target = $all("table.section-table tbody tr", section).filter(function (tr) {
          return tr.dataset.metric === anchor.metric;
        })[0];
      } else if (anchor.kind === "chart") {
        target = $(".charts[data-chart='" + anchor.chart + "']", section) || section;
        var plot = $(".plot[data-chart='" + anchor.chart + "'][data-side='" + anchor.side + "']", section);
        if (plot && anchor.bucket !== undefined && window.Plotly && Plotly.Fx) {
          var trace = (plot.data || [])[0] || {};
          var i = (trace.x || []).map(String).indexOf(String(anchor.bucket));
          if (i >= 0) { try { Plotly.Fx.hover(plot, [{curveNumber: 0, pointNumber: i}]); } catch (e) { /* hover is a nicety */ } }
        }
        if (target) { highlight(target); }
        if (plot && anchor.x0 !== undefined && anchor.x1 !== undefined) {
          return shadeWindow(plot, Number(anchor.x0), Number(anchor.x1)).then(function () { return true; });
        }
        return !!target;
      }
      if (target) { highlight(target); }
      return !!target;
    }).catch(function () { return false; });
  }

  /* A time-window anchor: the window x0..x1 as a shaded band over the whole height of its
     panel (a plotly shape, xref x / yref paper), replacing the band an earlier anchor drew. */
  var ANCHOR_SHAPE = "thread-anchor-window";

  function withoutBand(shapes) {
    return (shapes || []).filter(function (sh) { return sh.name !== ANCHOR_SHAPE; });
  }

  function shadeWindow(plot, x0, x1) {
    if (!window.Plotly || !isFinite(x0) || !isFinite(x1)) { return Promise.resolve(false); }
    $all(".plot[data-anchor-window]").forEach(function (p) {
      if (p === plot) { return; }
      delete p.dataset.anchorWindow;
      Plotly.relayout(p, {shapes: withoutBand((p.layout || {}).shapes)});
    });
    var band = {type: "rect", name: ANCHOR_SHAPE, xref: "x", yref: "paper",
                x0: Math.min(x0, x1), x1: Math.max(x0, x1), y0: 0, y1: 1, layer: "below",
                fillcolor: "rgba(255, 191, 0, 0.28)",
                line: {color: "rgba(230, 140, 0, 0.9)", width: 1, dash: "dot"}};
    return waitFor(function () { return plot.dataset.rendered === "1"; }, 20000).then(function () {
      return Plotly.relayout(plot, {shapes: withoutBand((plot.layout || {}).shapes).concat([band])});
    }).then(function () {
      plot.dataset.anchorWindow = band.x0 + "," + band.x1;
      return true;
    }).catch(function () { return false; });
  }

  function anchorOf(threadEl) {
    try { return JSON.parse(threadEl.dataset.anchor || "{}"); } catch (e) { return {}; }
  }

  function setupAnchorLinks() {
    $all(".thread .anchor-link").forEach(function (a) {
      a.addEventListener("click", function (ev) {
        var t = a.closest(".thread");
        var anchor = anchorOf(t);
        if (anchor.kind === "diff") { return; /* the #L<n> fragment does it */ }
        if (!document.getElementById("section-" + anchor.section)) { return; /* other page */ }
        ev.preventDefault();
        history.replaceState(null, "", a.getAttribute("href"));
        jumpTo(anchor);
      });
    });
    var params = new URLSearchParams(window.location.search);
    var id = params.get("anchor");
    if (id) {
      var t = document.getElementById("thread-" + id);
      if (t) { jumpTo(anchorOf(t)); }
    }
  }

  /* --- diff lines ---------------------------------------------------------------------- */
  function setupDiff() {
    if (!$("#new-thread-form")) { return; }
    $all("pre.diff-lines .diff-line").forEach(function (line) {
      var b = button("💬", "Start a thread on this line", "thread-line-btn");
      b.addEventListener("click", function () {
        var where = (line.dataset.file || "diff") + (line.dataset.fileLine ? ":" + line.dataset.fileLine : "");
        setAnchor({kind: "diff", line: Number(line.dataset.line)}, where + " (diff line " + line.dataset.line + ")");
        highlight(line);
        $("#new-thread-form").scrollIntoView({block: "center"});
      });
      line.insertBefore(b, line.firstChild);
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var clear = $("#new-thread-clear");
    if (clear) { clear.addEventListener("click", clearAnchor); }
    watchSections();
    setupAnchorLinks();
    setupDiff();
  });
})();
