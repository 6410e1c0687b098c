/* The review queue's keys (docs/admin.md#review-queue). No inline handlers and no eval: served as a file, so
   the page works under a CSP without 'unsafe-inline'. Approve and reject submit the queue's form with the
   matching button, so the admin action (and its permission and CSRF checks) does the work. */
(function () {
  "use strict";
  function start() {
    var form = document.getElementById("review-form");
    if (!form) { return; }
    var rows = Array.prototype.slice.call(form.querySelectorAll("tr.ef-held"));
    var reason = document.getElementById("review-reason");
    var approve = document.getElementById("review-approve");
    var reject = document.getElementById("review-reject");
    var all = document.getElementById("review-select-all");
    var current = -1;

    function box(row) { return row.querySelector("input[type=checkbox]"); }
    function highlight(index) {
      if (!rows.length) { return; }
      index = Math.max(0, Math.min(rows.length - 1, index));
      if (current >= 0) { rows[current].classList.remove("ef-current"); }
      current = index;
      rows[current].classList.add("ef-current");
      rows[current].scrollIntoView({block: "nearest"});
    }
    function selectedCount() { return rows.filter(function (row) { return box(row).checked; }).length; }
    function orHighlighted() {
      if (!selectedCount() && current >= 0) { box(rows[current]).checked = true; }
      return selectedCount() > 0;
    }
    function send(button) {
      if (!button || !orHighlighted()) { return; }
      if (form.requestSubmit) { form.requestSubmit(button); } else { button.click(); }
    }
    function rejectOrAsk() {
      if (reason && reason.value.trim()) { send(reject); } else if (reason) { orHighlighted(); reason.focus(); }
    }

    if (all) {
      all.addEventListener("change", function () {
        rows.forEach(function (row) { box(row).checked = all.checked; });
      });
    }
    if (reason) {
      reason.addEventListener("keydown", function (event) {
        if (event.key === "Enter") { event.preventDefault(); rejectOrAsk(); }  // never the first button: approve
        if (event.key === "Escape") { reason.blur(); }
      });
    }
    document.addEventListener("keydown", function (event) {
      var target = event.target;
      var typing = target && (target.tagName === "TEXTAREA" || target.tagName === "SELECT" ||
        (target.tagName === "INPUT" && target.type !== "checkbox"));
      if (typing || event.ctrlKey || event.metaKey || event.altKey) { return; }
      switch (event.key) {
        case "j": highlight(current + 1); break;
        case "k": highlight(current - 1); break;
        case "x": if (current >= 0) { box(rows[current]).checked = !box(rows[current]).checked; } break;
        case "*":
          if (all) { all.checked = !all.checked; all.dispatchEvent(new Event("change")); }
          break;
        case "a": send(approve); break;
        case "r": rejectOrAsk(); break;
        case "o": if (current >= 0) { window.location = rows[current].querySelector("a.ef-open").href; } break;
        default: return;
      }
      event.preventDefault();
    });
    highlight(0);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
