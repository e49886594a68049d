/* Sorting and filtering of tables; the page is complete without it. */
(function () {
  "use strict";
  var root = document.documentElement;
  root.className = root.className.replace(/\bno-js\b/, "js");

  function sortKey(cell) {
    if (!cell) { return ""; }
    var v = cell.getAttribute("data-sort");
    if (v === null) { v = cell.textContent.trim(); }
    var n = Number(v.replace(/,/g, ""));
    return (v !== "" && !isNaN(n)) ? n : v.toLowerCase();
  }
  function compare(a, b) {
    var na = typeof a === "number", nb = typeof b === "number";
    if (na && nb) { return a - b; }
    if (na !== nb) { return na ? -1 : 1; }
    return a < b ? -1 : (a > b ? 1 : 0);
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    if (!table.tHead || !table.tBodies.length) { return; }
    var head = table.tHead.rows[table.tHead.rows.length - 1];
    Array.prototype.forEach.call(head.cells, function (th, col) {
      if (th.classList.contains("nosort")) { return; }
      th.classList.add("sortable");
      th.tabIndex = 0;
      th.title = "sort by " + th.textContent.trim();
      function sort() {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
        rows.sort(function (a, b) { return dir * compare(sortKey(a.cells[col]), sortKey(b.cells[col])); });
        Array.prototype.forEach.call(head.cells, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
        rows.forEach(function (r) { body.appendChild(r); });
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sort(); }
      });
    });
  });

  function applyFilters(tableId) {
    var table = document.getElementById(tableId);
    if (!table || !table.tBodies.length) { return; }
    var controls = document.querySelectorAll("[data-filter-for='" + tableId + "']");
    var shown = 0, total = 0;
    Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
      var keep = true;
      Array.prototype.forEach.call(controls, function (c) {
        var want = (c.value || "").trim().toLowerCase();
        if (!want) { return; }
        var attr = c.getAttribute("data-attr");
        if (attr) {
          var have = (row.getAttribute("data-" + attr) || "").toLowerCase();
          if (have.split(" ").indexOf(want) < 0) { keep = false; }
        } else if (row.textContent.toLowerCase().indexOf(want) < 0) {
          keep = false;
        }
      });
      row.classList.toggle("hidden", !keep);
      total += 1;
      if (keep) { shown += 1; }
    });
    var counter = document.querySelector("[data-count-for='" + tableId + "']");
    if (counter) { counter.textContent = shown === total ? "" : shown + " of " + total + " rows"; }
  }
  Array.prototype.forEach.call(document.querySelectorAll("[data-filter-for]"), function (c) {
    var id = c.getAttribute("data-filter-for");
    c.addEventListener("input", function () { applyFilters(id); });
    c.addEventListener("change", function () { applyFilters(id); });
  });

  window.addEventListener("beforeprint", function () {
    Array.prototype.forEach.call(document.querySelectorAll("details"), function (d) { d.open = true; });
  });
}());
