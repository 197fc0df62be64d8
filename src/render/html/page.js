// kerntax report: sortable tables. Errors are recorded on the page itself
// (data-errors on <html>) so a headless browser can see them.
(function () {
  "use strict";
  function cellValue(row, i) {
    var cell = row.cells[i];
    if (!cell) return "";
    var v = cell.getAttribute("data-v");
    return v !== null ? parseFloat(v) : cell.textContent.trim().toLowerCase();
  }
  function sortBy(table, i, th) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var down = th.getAttribute("aria-sort") !== "descending";
    rows.sort(function (a, b) {
      var x = cellValue(a, i), y = cellValue(b, i);
      var c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
      return down ? -c : c;
    });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", down ? "descending" : "ascending");
    rows.forEach(function (r) { body.appendChild(r); });
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      th.addEventListener("click", function () { sortBy(table, i, th); });
    });
  });
  document.documentElement.setAttribute("data-ready", "1");
})();
