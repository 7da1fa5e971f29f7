(function () {
  var tools = document.getElementById("wf-tools");
  if (!tools) { return; }
  tools.hidden = false;
  tools.addEventListener("click", function (ev) {
    var b = ev.target.closest("button[data-open]");
    if (!b) { return; }
    var open = b.getAttribute("data-open") === "1";
    document.querySelectorAll("details.trace").forEach(function (d) { d.open = open; });
  });
})();