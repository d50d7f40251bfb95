/* The summary's links (templates/reviewapp/partials/summary.html): a fact names the device, the
   page section and the chart that show it. Following one selects the device (the lazy sections
   reload for it), brings the section into view (which loads it) and, once it is drawn, scrolls
   to the chart or table and marks it. Kept apart from comparison.js: it only uses the page's
   own controls (#device-select, the sections' data-state). */
(function () {
  "use strict";

  function target(section, chart) {
    if (!chart) { return section; }
    return section.querySelector('[data-chart="' + chart + '"]') ||
      section.querySelector('[data-table="' + chart + '"]') || section;
  }

  function follow(link) {
    var dev = link.dataset.dev;
    var section = document.getElementById("section-" + link.dataset.section);
    if (!section) { return; }
    var sel = document.getElementById("device-select");
    if (sel && dev && sel.value !== dev &&
        Array.prototype.some.call(sel.options, function (o) { return o.value === dev; })) {
      sel.value = dev;
      sel.dispatchEvent(new Event("change"));
    }
    section.scrollIntoView({block: "start"});
    var tries = 0;
    (function wait() {
      var loaded = section.dataset.state === "loaded" &&
        (section.dataset.loaded || "").split("|")[0] === (sel ? sel.value : "");
      if (!loaded) {
        if (section.dataset.state !== "loading" && section.dataset.state !== "loaded" &&
            tries === 10) {
          section.querySelector("h2").click();  /* load it even if the observer did not */
        }
        if (++tries < 200) { window.setTimeout(wait, 50); }
        return;
      }
      var t = target(section, link.dataset.chart);
      document.querySelectorAll(".fact-target").forEach(function (e) {
        e.classList.remove("fact-target");
      });
      t.classList.add("fact-target");
      t.scrollIntoView({block: "center"});
      document.body.dataset.followed = link.dataset.section + "|" + (link.dataset.chart || "");
    }());
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("a.fact-link").forEach(function (a) {
      a.addEventListener("click", function (ev) {
        ev.preventDefault();
        follow(a);
      });
    });
  });
}());
