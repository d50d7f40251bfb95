/* Comparison page: draw the plotly figures computed server-side (reviewapp/charts.py) and
   poll the progress JSON while the analysis runs; reload once it is done. */
(function () {
  "use strict";
  function drawFigures() {
    var node = document.getElementById("figures-data");
    if (!node || typeof Plotly === "undefined") { return; }
    var figures = JSON.parse(node.textContent);
    document.querySelectorAll(".plot[data-figure]").forEach(function (el) {
      var fig = figures[el.dataset.figure];
      if (!fig) { el.classList.add("empty"); el.textContent = "no data on this side"; return; }
      Plotly.newPlot(el, fig.data, fig.layout, {displaylogo: false, responsive: true})
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
    if (!box || box.dataset.done === "1") { return; }
    fetch(box.dataset.progressUrl, {headers: {"Accept": "application/json"}})
      .then(function (r) { return r.json(); })
      .then(function (p) {
        document.getElementById("status-text").textContent = p.status;
        document.getElementById("status-progress").value = p.progress;
        document.getElementById("status-pct").textContent = p.progress + "%";
        box.className = "status-box status-" + p.status;
        renderJobs(document.getElementById("job-list"), p.jobs);
        if (p.done) {
          box.dataset.done = "1";
          if (p.status === "ready") { window.location.reload(); }
        } else {
          window.setTimeout(poll, 1000);
        }
      })
      .catch(function () { window.setTimeout(poll, 3000); });
  }

  document.addEventListener("DOMContentLoaded", function () {
    drawFigures();
    poll();
  });
}());
