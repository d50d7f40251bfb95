/* Upload form helpers (issue 9):
   - "Policies under test": when both kernels are typed, ask the server which policy fields the
     two kernels' presets set differently (the engine's presets) and preselect those choices.
   - Stack builder: kind, disks, chunk and device type write the stack spec
     (kind:disks=N,chunk=...,device=...) into the Device stack field.
   - Fixes:-aware pairing (issue 8): when the chosen patch mail names Fixes: of a known patch
     (by commit id or subject), offer that patch's comparisons as the baseline (the same radio
     buttons the server renders for ?patch=, posted as baseline_from). */
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

  function el(tag, text, attrs) {
    var e = document.createElement(tag);
    if (text) { e.textContent = text; }
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    return e;
  }

  function radio(value, checked) {
    var r = el("input", "", {type: "radio", name: "baseline_from", value: value});
    r.checked = checked;
    return r;
  }

  function showOffers(slot, offers) {
    slot.textContent = "";
    if (!offers.length) { return; }
    var fs = el("fieldset", "", {id: "fix-offers"});
    fs.appendChild(el("legend", "Baseline from the fixed commit"));
    offers.forEach(function (o) {
      var p = el("p", "", {"class": "small fix-match", "data-match": o.match});
      p.appendChild(document.createTextNode("This patch says "));
      p.appendChild(el("code", "Fixes: " + o.fixes));
      p.appendChild(document.createTextNode(": that commit is "));
      p.appendChild(el("a", "patch #" + o.patch.id, {href: o.patch.url}));
      p.appendChild(document.createTextNode(" (" + (o.match === "subject" ? "same subject" :
        "commit " + o.patch.commit.slice(0, 12) + (o.match === "sha" ? "" :
        ", though its subject differs")) + "). Its comparisons' patched runs (the kernel " +
        "with the fixed commit) can be this patch's baseline:"));
      fs.appendChild(p);
      if (!o.comparisons.length) { fs.appendChild(el("p", "No comparison of that patch yet.",
        {"class": "small"})); }
      o.comparisons.forEach(function (c) {
        var label = el("label", "", {"class": "fix-offer"});
        label.appendChild(radio(String(c.id), false));
        label.appendChild(document.createTextNode(" patched runs of "));
        label.appendChild(el("a", "comparison #" + c.id, {href: c.url}));
        label.appendChild(document.createTextNode(" (" + c.status + ", " +
          c.created.slice(0, 10) + ")"));
        fs.appendChild(label);
        fs.appendChild(el("br"));
      });
    });
    var none = el("label", "", {"class": "fix-offer"});
    none.appendChild(radio("", true));
    none.appendChild(document.createTextNode(" no: upload baseline files below"));
    fs.appendChild(none);
    slot.appendChild(fs);
  }

  function mailOffers() {
    var slot = document.getElementById("fix-offers-slot");
    var input = document.getElementById("id_mbox");
    if (!slot || !input) { return; }
    if (!input.files || !input.files.length) { showOffers(slot, []); return; }
    var body = new FormData();
    body.append("mbox", input.files[0]);
    var token = document.querySelector("#upload-form input[name=csrfmiddlewaretoken]");
    fetch(slot.dataset.url, {method: "POST", body: body, credentials: "same-origin",
                             headers: {"X-CSRFToken": token ? token.value : ""}})
      .then(function (r) { return r.json(); })
      .then(function (j) { showOffers(slot, j.offers || []); slot.dataset.loaded = "1"; })
      .catch(function () { slot.dataset.loaded = "error"; });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var mbox = document.getElementById("id_mbox");
    if (mbox) { mbox.addEventListener("change", mailOffers); }
    ["id_baseline_kernel", "id_patched_kernel"].forEach(function (id) {
      var e = document.getElementById(id);
      if (e) { e.addEventListener("change", preselect); }
    });
    preselect();
    var w = document.getElementById("sb-write");
    if (w) { w.addEventListener("click", writeSpec); }
  });
}());
