// The divergence atlas's filters: text, framework and mode (docs/gen_pages.py writes the table).
document$.subscribe(function () {
  var table = document.getElementById("atlas");
  if (!table) return;
  var text = document.getElementById("atlas-text");
  var fw = document.getElementById("atlas-framework");
  var mode = document.getElementById("atlas-mode");
  var count = document.getElementById("atlas-count");
  var rows = Array.prototype.slice.call(table.tBodies[0].rows);
  function apply() {
    var t = text.value.toLowerCase(), f = fw.value, m = mode.value, shown = 0;
    rows.forEach(function (r) {
      var ok = (!t || r.textContent.toLowerCase().indexOf(t) >= 0) &&
        (!f || r.dataset.framework === f || r.dataset.framework === "") &&
        (!m || r.dataset.mode === m || r.dataset.mode === "");
      r.style.display = ok ? "" : "none";
      if (ok) shown++;
    });
    count.textContent = shown + " of " + rows.length;
  }
  [text, fw, mode].forEach(function (e) { e.addEventListener("input", apply); });
  apply();
});
