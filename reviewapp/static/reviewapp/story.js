/* Request stories (issue 9, lineage): a click on a point of the LBA chart opens that request's
   story (the parent bio's Q, A, Q, G, I, D, C and the merged bios) as a small plotly timeline
   under the chart. The stories come with the ordering section's payload ("stories":
   {side: [[timeline per stored request] per run]}); the first requests of each run only. */
(function () {
  "use strict";

  var ORDER = ["Q", "X", "A", "G", "I", "M", "F", "D", "C"];

  function pick(list, sector, x, xs) {
    /* the stored request at this sector; among several, the one nearest in time (the LBA
       chart's time and the trace's differ by the first event: align the first requests) */
    var hits = list.filter(function (r) { return r.sector === sector; });
    if (hits.length < 2) { return hits[0] || null; }
    var d0 = Math.min.apply(null, list.map(function (r) { return r.d_s; }));
    var x0 = Math.min.apply(null, xs);
    hits.sort(function (a, b) {
      return Math.abs(a.d_s - d0 - (x - x0)) - Math.abs(b.d_s - d0 - (x - x0));
    });
    return hits[0];
  }

  function draw(box, side, run, rec, sector) {
    box.innerHTML = "";
    box.dataset.side = side;
    box.dataset.run = String(run);
    var h = document.createElement("p");
    h.className = "story-title";
    if (!rec) {
      box.dataset.request = "";
      h.textContent = "No story kept for the request at sector " + sector + " (" + side +
        ", run " + (run + 1) + "): stories are kept for the first requests of each run.";
      box.appendChild(h);
      return Promise.resolve();
    }
    box.dataset.request = rec.request;
    h.textContent = "Story of " + rec.request + " (" + side + ", run " + (run + 1) + ")";
    box.appendChild(h);
    var plot = document.createElement("div");
    plot.className = "plot story-plot";
    box.appendChild(plot);
    var labels = rec.points.map(function (p) { return p.a + " " + p.dev; });
    var cats = labels.filter(function (l, i) { return labels.indexOf(l) === i; });
    cats.sort(function (a, b) {
      return ORDER.indexOf(a.split(" ")[0]) - ORDER.indexOf(b.split(" ")[0]);
    });
    var data = [{type: "scatter", mode: "lines+markers+text", x: rec.points.map(function (p) { return p.us; }),
                 y: labels, text: rec.points.map(function (p) { return p.a; }),
                 textposition: "top center", hovertext: rec.points.map(function (p) { return p.what + ": +" + p.us + " us"; }),
                 hoverinfo: "text", marker: {size: 9}, line: {width: 1, color: "#888"}}];
    var layout = {height: 80 + 26 * cats.length, margin: {l: 110, r: 20, t: 10, b: 40},
                  xaxis: {title: {text: "us from the first event"}, zeroline: false},
                  yaxis: {categoryorder: "array", categoryarray: cats.slice().reverse()},
                  showlegend: false};
    return Plotly.newPlot(plot, data, layout, {displaylogo: false, responsive: true})
      .then(function () { plot.dataset.rendered = "1"; });
  }

  function attach(section, data) {
    var stories = data.stories || {};
    if (!Object.keys(stories).length) { return; }
    var body = section.querySelector(".section-body");
    var box = document.createElement("div");
    box.id = "request-story";
    box.className = "request-story";
    var hint = document.createElement("p");
    hint.className = "small story-title";
    hint.textContent = "Pick a point of the LBA chart to see that request's story.";
    box.appendChild(hint);
    var lba = body.querySelector(".charts[data-chart='lba']");
    body.insertBefore(box, lba ? lba.nextSibling : body.firstChild);
    body.querySelectorAll(".charts[data-chart='lba'] .plot").forEach(function (plot) {
      if (!plot.on) { return; }
      plot.on("plotly_click", function (ev) {
        var pt = (ev && ev.points || [])[0];
        if (!pt) { return; }
        var side = plot.dataset.side;
        var run = Number(plot.closest(".charts").dataset.run || 0);
        var list = (stories[side] || [])[run] || [];
        var xs = (pt.data && pt.data.x) || [pt.x];
        draw(box, side, run, pick(list, pt.y, pt.x, xs), pt.y);
        /* the story row follows the chart row that was clicked (several runs: one shown) */
        var row = plot.closest(".charts");
        if (row.nextSibling !== box) { body.insertBefore(box, row.nextSibling); }
      });
    });
  }

  function attachSeek(section, data) {
    /* a bar of the seek histogram (D stage): the first stored request (run 1 first) whose
       distance from the previous request falls in that bucket */
    var stories = data.stories || {};
    if (!Object.keys(stories).length || (data.stage || data.default_stage) !== "D") { return; }
    var body = section.querySelector(".section-body");
    var box = document.createElement("div");
    box.id = "seek-story";
    box.className = "request-story";
    var hint = document.createElement("p");
    hint.className = "small story-title";
    hint.textContent = "Pick a bar of the seek histogram to see the story of a request with that seek distance.";
    box.appendChild(hint);
    var row = body.querySelector(".charts[data-chart='seek']");
    if (!row) { return; }
    body.insertBefore(box, row.nextSibling);
    row.querySelectorAll(".plot").forEach(function (plot) {
      if (!plot.on) { return; }
      plot.on("plotly_click", function (ev) {
        var pt = (ev && ev.points || [])[0];
        if (!pt) { return; }
        var side = plot.dataset.side, runs = stories[side] || [], found = null, run = 0;
        for (var r = 0; r < runs.length && !found; r++) {
          found = runs[r].filter(function (t) { return t.seek_bucket === pt.pointNumber; })[0] || null;
          if (found) { run = r; }
        }
        box.dataset.bucket = String(pt.pointNumber);
        draw(box, side, run, found, pt.x);
        if (!found) {
          box.querySelector(".story-title").textContent = "No stored request of " + side +
            " has a seek distance of " + pt.x + " (stories are kept for the first requests of each run).";
        }
      });
    });
  }

  document.addEventListener("blkreview:section-rendered", function (e) {
    var d = e.detail || {};
    if (d.data && d.data.section === "ordering") { attach(d.section, d.data); }
    if (d.data && d.data.section === "seek") { attachSeek(d.section, d.data); }
  });
})();
