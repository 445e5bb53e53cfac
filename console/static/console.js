// markov console: progressive enhancement. Pages work without this file;
// with it, the inbox follows the suspension feed and the machine page
// follows the machine's events (server-sent events): tokens appear as the
// model streams them, every event is added to the timeline, and the page
// swaps in its fresh content when a step or a suspension changes it. The
// charter graph is drawn.
(function () {
  "use strict";
  var body = document.body;
  var prefix = body.dataset.prefix || "/ui/";

  // The kinds of a machine's events, and the statuses of the suspension
  // feed: the names of the server-sent events.
  var KINDS = ["text_delta", "thinking_delta", "tool_started", "tool_finished",
    "suspended", "resumed", "expired", "cancelled", "escalated", "reminded",
    "state_changed", "transition", "spawn", "cede", "step"];
  var STATUSES = ["pending", "resolved", "expired", "cancelled"];
  // Events after which the page shows something new.
  var CHANGES = { step: 1, suspended: 1, resumed: 1, expired: 1, cancelled: 1, escalated: 1, reminded: 1, transition: 1, spawn: 1, cede: 1, state_changed: 1 };

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

  // KEEP are the elements this script builds (the drawn graph, the
  // timeline, the stream): a refresh never touches them.
  var KEEP = { graph: 1, timeline: 1, stream: 1 };

  // editing reports whether the person is at work in el: it holds the
  // focus, or a form they typed in.
  function editing(el) {
    if (el.nodeType !== 1) return false;
    var a = document.activeElement;
    if (a && a !== body && el.contains(a)) return true;
    return !!(el.matches("form[data-dirty]") || el.querySelector("form[data-dirty]"));
  }

  function syncAttributes(old, fresh) {
    var i, a;
    for (i = old.attributes.length - 1; i >= 0; i--) {
      a = old.attributes[i];
      if (!fresh.hasAttribute(a.name)) old.removeAttribute(a.name);
    }
    for (i = 0; i < fresh.attributes.length; i++) {
      a = fresh.attributes[i];
      if (old.getAttribute(a.name) !== a.value) old.setAttribute(a.name, a.value);
    }
  }

  // patch makes old look like fresh, touching only what differs: where
  // the two have the same shape it goes down into the children, and
  // where they do not it swaps the node, unless the person is editing
  // in it: that is left as it is (their typing, their focus).
  function patch(old, fresh) {
    if (old.isEqualNode(fresh) || (old.id && KEEP[old.id])) return;
    if (old.nodeType !== fresh.nodeType || old.nodeName !== fresh.nodeName ||
        old.childNodes.length !== fresh.childNodes.length) {
      if (!editing(old)) old.replaceWith(fresh);
      return;
    }
    if (old.nodeType !== 1) {
      old.nodeValue = fresh.nodeValue;
      return;
    }
    if (!(old.matches("form, input, textarea, select") && editing(old))) syncAttributes(old, fresh);
    var oc = Array.prototype.slice.call(old.childNodes);
    var fc = Array.prototype.slice.call(fresh.childNodes);
    for (var i = 0; i < oc.length; i++) patch(oc[i], fc[i]);
  }

  var refreshing = false, again = false;
  function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) {
        if (r.redirected && new URL(r.url).pathname === prefix + "login") { stopped(true); return null; }
        return r.ok ? r.text() : null;
      })
      .then(function (html) {
        if (!html) return;
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("live");
        var live = document.getElementById("live");
        if (!fresh || !live) return;
        var freshGraph = fresh.querySelector("#graph");
        var source = freshGraph ? freshGraph.textContent : null;
        patch(live, fresh);
        if (source !== null) redrawGraph(source);
        body.dataset.refreshed = String(Number(body.dataset.refreshed || 0) + 1);
      })
      .finally(function () {
        refreshing = false;
        if (again) { again = false; refresh(); }
      });
  }

  // soon coalesces the calls of fn within ms into one.
  function soon(fn, ms) {
    var t = null;
    return function () {
      if (t) return;
      t = setTimeout(function () { t = null; fn(); }, ms);
    };
  }
  var refreshSoon = soon(refresh, 100);

  function open(url, names, on) {
    if (!window.EventSource) return;
    var es = new EventSource(url);
    names.forEach(function (n) { es.addEventListener(n, on); });
    es.onopen = function () { body.dataset.following = "1"; };
    es.onerror = function () {
      if (es.readyState === EventSource.CLOSED) stopped(false);
    };
  }

  // stopped says, once, that the page no longer follows live, with a way
  // to sign in again and come back here.
  function stopped(signedOut) {
    body.dataset.following = "0";
    if (document.getElementById("stopped")) return;
    var p = document.createElement("p");
    p.id = "stopped";
    p.className = "warning";
    p.setAttribute("role", "alert");
    var a = document.createElement("a");
    a.href = prefix + "login?next=" + encodeURIComponent(location.pathname + location.search);
    a.textContent = "Sign in again";
    p.append(signedOut ? "Your session ended: this page stopped updating. " :
      "This page stopped updating (your session may have ended). ", a, ".");
    var main = document.getElementById("live");
    main.parentNode.insertBefore(p, main);
  }

  // followInbox refreshes the inbox when the suspension feed brings a
  // change. The feed starts from its beginning; changes saved well before
  // the page was made are already on it.
  function followInbox() {
    var inbox = document.getElementById("inbox");
    var since = Date.parse(inbox ? inbox.dataset.rendered : "") - 5000;
    open(prefix + "events", STATUSES, function (m) {
      var c = JSON.parse(m.data);
      if (!(Date.parse(c.at) < since)) refreshSoon();
    });
  }

  function clock(at) {
    var d = at ? new Date(at) : new Date();
    return isNaN(d) ? "" : d.toLocaleTimeString();
  }

  // summary is one line about event e for the timeline.
  function summary(e) {
    switch (e.kind) {
      case "tool_started": return e.tool.name + " " + (e.tool.input ? JSON.stringify(e.tool.input) : "");
      case "tool_finished": return e.tool.name + (e.tool.suspend_id ? " suspended" : (e.tool.is_error ? " failed: " : " → ") + (e.tool.result || ""));
      case "suspended": return (e.call && e.call.Reason) || (e.lifecycle && e.lifecycle.reason) || "";
      case "resumed": case "expired": case "cancelled": case "escalated": case "reminded":
        return e.lifecycle ? [e.lifecycle.suspend_id, e.lifecycle.cause, e.lifecycle.initiator].filter(Boolean).join(" ") : "";
      case "transition": return e.effect ? "→ " + e.effect.target : "";
      case "state_changed": return JSON.stringify(e.state);
      case "step": return e.step ? e.step.Reason || e.step.reason || "" : "";
      default: return "";
    }
  }

  function followMachine(id) {
    var timeline = document.getElementById("timeline");
    var stream = document.getElementById("stream");
    if (!timeline || !stream) return;
    var last = null; // the timeline entry the next delta of its block extends
    function add(e) {
      var delta = e.kind === "text_delta" || e.kind === "thinking_delta";
      var key = delta ? [e.kind, e.instance_id, e.block || 0].join(" ") : null;
      if (delta && last && last.dataset.key === key) {
        last.querySelector(".text").textContent += e.text;
        return;
      }
      var li = document.createElement("li");
      li.className = "ev " + e.kind;
      var t = document.createElement("time");
      t.textContent = clock(e.at);
      var k = document.createElement("b");
      k.textContent = e.kind.replace("_", " ");
      var s = document.createElement("span");
      s.className = "text";
      s.textContent = delta ? e.text : summary(e);
      li.append(t, " ", k, " ", s);
      if (key) li.dataset.key = key;
      last = key ? li : null;
      timeline.append(li);
      timeline.dataset.count = String(timeline.children.length);
    }
    open(prefix + "events?machine=" + encodeURIComponent(id), KINDS, function (m) {
      var e = JSON.parse(m.data);
      add(e);
      if (e.kind === "text_delta" && e.live) {
        stream.hidden = false;
        stream.textContent += e.text;
      }
      var shown = Number((document.getElementById("revision") || {}).dataset.revision || 0);
      if (CHANGES[e.kind] && !e.live && e.rev > shown) {
        if (e.kind === "step") { stream.textContent = ""; stream.hidden = true; }
        refreshSoon();
      }
    });
  }

  // A form the person typed in is theirs until they send it: refreshes
  // leave it alone.
  document.addEventListener("input", function (e) {
    var f = e.target.closest && e.target.closest("form");
    if (f) f.dataset.dirty = "1";
  });

  var g = document.getElementById("graph");
  if (g) { g.dataset.source = g.textContent; drawGraph(); }
  if (body.dataset.live === "inbox") followInbox();
  else if (body.dataset.live) followMachine(body.dataset.live);
})();
