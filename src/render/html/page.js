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
  // Timeline readout: the values of every panel at the bucket under the
  // pointer (all panels follow it), with a cursor line. `#t=SECONDS` in the
  // address shows a moment without a pointer (a link to it).
  var charts = Array.prototype.slice.call(document.querySelectorAll("svg.chart[data-times]"));
  function fmt(v) {
    var a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toFixed(2) + " M";
    if (a >= 1e4) return (v / 1e3).toFixed(1) + " k";
    if (a >= 100) return v.toFixed(0);
    return v.toFixed(2);
  }
  function showAt(i) {
    charts.forEach(function (svg) {
      var times = svg.getAttribute("data-times").split(",").map(parseFloat);
      var k = Math.max(0, Math.min(times.length - 1, i));
      var left = parseFloat(svg.getAttribute("data-left"));
      var width = svg.viewBox.baseVal.width;
      var x = times.length > 1 ? left + (width - left) * k / (times.length - 1) : left;
      var parts = [];
      svg.querySelectorAll("polyline.series").forEach(function (p) {
        var v = parseFloat(p.getAttribute("data-values").split(",")[k]);
        parts.push(p.getAttribute("data-label") + " " + fmt(v) + " " + p.getAttribute("data-unit"));
      });
      var cursor = svg.querySelector("line.cursor");
      cursor.setAttribute("x1", x);
      cursor.setAttribute("x2", x);
      cursor.setAttribute("visibility", "visible");
      var out = document.querySelector("output.readout[for='" + svg.id + "']");
      if (out) out.textContent = "at " + times[k].toFixed(2) + " s: " + parts.join(", ");
    });
  }
  function indexAt(svg, secs) {
    var times = svg.getAttribute("data-times").split(",").map(parseFloat);
    var best = 0;
    times.forEach(function (t, k) { if (Math.abs(t - secs) < Math.abs(times[best] - secs)) best = k; });
    return best;
  }
  charts.forEach(function (svg) {
    svg.addEventListener("mousemove", function (e) {
      var r = svg.getBoundingClientRect();
      var width = svg.viewBox.baseVal.width;
      var left = parseFloat(svg.getAttribute("data-left"));
      var n = svg.getAttribute("data-times").split(",").length;
      var x = (e.clientX - r.left) / r.width * width;
      showAt(n > 1 ? Math.round((x - left) / (width - left) * (n - 1)) : 0);
    });
  });
  var at = /#t=([0-9.]+)/.exec(location.hash);
  if (at && charts.length) showAt(indexAt(charts[0], parseFloat(at[1])));
  document.documentElement.setAttribute("data-ready", "1");
})();
