/* Upload form helpers (issue 9):
   - "Policies under test": when both kernels are typed, ask the server which policy fields the
     two kernels' presets set differently (the engine's presets) and preselect those choices.
   - Stack builder: kind, disks, chunk and device type write the stack spec
     (kind:disks=N,chunk=...,device=...) into the Device stack field. */
(function () {
  "use strict";

  function preselect() {
    var box = document.getElementById("field-policy_choices");
    var base = document.getElementById("id_baseline_kernel");
    var patched = document.getElementById("id_patched_kernel");
    if (!box || !base || !patched || !base.value.trim() || !patched.value.trim()) { return; }
    var url = box.dataset.diffUrl + "?" + new URLSearchParams(
      {baseline: base.value.trim(), patched: patched.value.trim()}).toString();
    fetch(url, {credentials: "same-origin"})
      .then(function (r) { return r.json(); })
      .then(function (j) {
        var wanted = {};
        (j.values || []).forEach(function (v) { wanted[v] = true; });
        var seen = {};
        var boxes = Array.prototype.slice.call(box.querySelectorAll("input[name=policy_choices]"));
        /* one choice per field: the latest kernel's entry with the wanted value */
        boxes.reverse().forEach(function (cb) {
          var v = cb.dataset.value;
          var field = v.split("=")[0];
          cb.checked = !!wanted[v] && !seen[field];
          if (cb.checked) { seen[field] = true; }
        });
        var note = document.getElementById("policy-preselect-note");
        if (note) {
          note.textContent = (j.values || []).length ?
            "preselected: what the presets of " + base.value.trim() + " and " +
            patched.value.trim() + " differ in (" + j.values.length + ")" :
            "the two kernels' presets do not differ";
        }
        box.dataset.preselected = String((j.values || []).length);
      })
      .catch(function () { /* the choices stay as they are */ });
  }

  function writeSpec() {
    var b = document.getElementById("stack-builder");
    if (!b) { return; }
    var kind = document.getElementById("sb-kind").value;
    var parts = [];
    var disks = document.getElementById("sb-disks").value.trim();
    var chunk = document.getElementById("sb-chunk").value.trim();
    var device = document.getElementById("sb-device").value;
    if (disks && kind !== "disk") { parts.push("disks=" + disks); }
    if (chunk && kind !== "disk" && kind !== "cache") { parts.push("chunk=" + chunk); }
    if (device) { parts.push("device=" + device); }
    var target = document.getElementById(b.dataset.target);
    if (target) { target.value = kind + (parts.length ? ":" + parts.join(",") : ""); }
  }

  document.addEventListener("DOMContentLoaded", function () {
    ["id_baseline_kernel", "id_patched_kernel"].forEach(function (id) {
      var e = document.getElementById(id);
      if (e) { e.addEventListener("change", preselect); }
    });
    preselect();
    var w = document.getElementById("sb-write");
    if (w) { w.addEventListener("click", writeSpec); }
  });
}());
