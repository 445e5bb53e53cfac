// markov console: progressive enhancement. Pages work without this file;
// with it, the inbox and machine pages follow a server-sent change stream
// and swap in their fresh content, and the charter graph is drawn.
(function () {
  "use strict";
  var body = document.body;
  var prefix = body.dataset.prefix || "/ui/";

  function drawGraph() {
    var el = document.getElementById("graph");
    if (!el || el.dataset.drawn) return;
    el.dataset.drawn = "1";
    var s = document.createElement("script");
    s.src = prefix + "static/mermaid.min.js";
    s.onload = function () {
      window.mermaid.initialize({ startOnLoad: false, securityLevel: "strict" });
      window.mermaid.run({ nodes: [el] });
    };
    document.head.appendChild(s);
  }

  function redrawGraph(fresh) {
    var el = document.getElementById("graph");
    if (!el || !window.mermaid) return drawGraph();
    if (el.dataset.source === fresh) return;
    el.removeAttribute("data-processed");
    el.textContent = fresh;
    el.dataset.source = fresh;
    window.mermaid.run({ nodes: [el] });
  }

  function refresh() {
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) return;
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("live");
        var live = document.getElementById("live");
        if (!fresh || !live) return;
        var graph = document.getElementById("graph");
        var freshGraph = fresh.querySelector("#graph");
        var source = freshGraph ? freshGraph.textContent : null;
        if (graph && freshGraph) freshGraph.replaceWith(graph); // keep the drawn SVG
        live.replaceWith(fresh);
        if (source !== null) redrawGraph(source);
        body.dataset.refreshed = String(Number(body.dataset.refreshed || 0) + 1);
      });
  }

  function follow(what) {
    if (!window.EventSource) return;
    var url = prefix + "events" + (what === "inbox" ? "" : "?machine=" + encodeURIComponent(what));
    var es = new EventSource(url);
    es.addEventListener("change", refresh);
    es.onopen = function () { body.dataset.following = "1"; };
  }

  var g = document.getElementById("graph");
  if (g) { g.dataset.source = g.textContent; drawGraph(); }
  if (body.dataset.live) follow(body.dataset.live);
})();
