(function () {
  "use strict";
  var table = document.getElementById("results");
  if (!table || !table.tHead || !table.tBodies.length) { return; }
  var body = table.tBodies[0];
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  function key(row, col) {
    var cell = row.cells[col];
    return cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort") : cell.textContent.trim();
  }
  heads.forEach(function (th, col) {
    var button = document.createElement("button");
    button.type = "button";
    button.textContent = th.textContent;
    th.textContent = "";
    th.appendChild(button);
    button.addEventListener("click", function () {
      var up = th.getAttribute("aria-sort") !== "ascending";
      var numeric = th.classList.contains("num");
      heads.forEach(function (other) { other.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", up ? "ascending" : "descending");
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = key(a, col), y = key(b, col);
        var order = numeric ? parseFloat(x) - parseFloat(y) : x.localeCompare(y);
        return (up ? order : -order) || parseFloat(key(a, 0)) - parseFloat(key(b, 0));
      });
      var fragment = document.createDocumentFragment();
      rows.forEach(function (row) { fragment.appendChild(row); });
      body.appendChild(fragment);
    });
  });
})();
