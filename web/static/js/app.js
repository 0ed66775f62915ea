// Vigil UI behaviour. Vanilla JavaScript, no libraries. It never builds
// HTML from data: text goes in with textContent and DOM nodes only, so
// the server's escaping is the only escaping there is.
"use strict";

(function () {
  function $(sel, root) { return (root || document).querySelector(sel); }
  function $$(sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); }
  function typing(e) {
    var t = e.target;
    return t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
  }
  function cpLen(s) { return Array.from(s).length; }

  // ---- Lists: j/k move, Enter opens ------------------------------------
  function listNav() {
    var list = $("[data-nav-list]");
    if (!list) return;
    var rows = $$("[data-nav-item]", list), cur = -1;
    function select(i) {
      if (!rows.length) return;
      i = Math.max(0, Math.min(rows.length - 1, i));
      if (cur >= 0) rows[cur].classList.remove("selected");
      cur = i;
      rows[cur].classList.add("selected");
      rows[cur].scrollIntoView({ block: "nearest" });
      var a = $("a", rows[cur]); if (a) a.focus({ preventScroll: true });
      document.dispatchEvent(new CustomEvent("vigil:select", { detail: rows[cur] }));
    }
    document.addEventListener("keydown", function (e) {
      if (typing(e) || e.ctrlKey || e.metaKey || e.altKey) return;
      if (e.key === "j") { select(cur + 1); e.preventDefault(); }
      else if (e.key === "k") { select(cur - 1); e.preventDefault(); }
      else if (e.key === "Enter" && cur >= 0 && rows[cur].dataset.href && document.activeElement.tagName !== "BUTTON") {
        location.href = rows[cur].dataset.href; e.preventDefault();
      }
    });
    window.vigilSelected = function () { return cur >= 0 ? rows[cur] : null; };
    window.vigilSelect = select;
    window.vigilCurrent = function () { return cur; };
  }

  // ---- Addresses: fragments open, expand and flash ---------------------
  function findAddress(addr) {
    var all = $$("[data-address]"), i;
    for (i = 0; i < all.length; i++) if (all[i].getAttribute("data-address") === addr && all[i].tagName === "MARK") return all[i];
    for (i = 0; i < all.length; i++) if (all[i].getAttribute("data-address") === addr) return all[i];
    var byId = document.getElementById(addr);
    if (byId) return byId;
    // The closest enclosing value: strip the selector, then path steps.
    var p = addr.replace(/:[^:]*$/, "");
    while (p.indexOf(".") > 0) {
      var el = document.getElementById(p) || $("[data-path=\"" + CSS.escape(p) + "\"]");
      if (el) return el;
      p = p.slice(0, p.lastIndexOf("."));
    }
    return null;
  }
  function flash(el) {
    var d = el.parentElement;
    while (d) { if (d.tagName === "DETAILS") d.open = true; d = d.parentElement; }
    el.scrollIntoView({ block: "center" });
    el.classList.remove("flash-on"); void el.offsetWidth; el.classList.add("flash-on");
    setTimeout(function () { el.classList.remove("flash-on"); }, 1500);
  }
  function openFragment() {
    if (!location.hash || location.hash.length < 2) return;
    var addr;
    try { addr = decodeURIComponent(location.hash.slice(1)); } catch (e) { addr = location.hash.slice(1); }
    if (addr.indexOf("state=") === 0) return; // the playground's
    var el = findAddress(addr);
    if (el) { flash(el); markCurrent(addr); }
  }

  // ---- Navigator: n / p ---------------------------------------------
  var navIndex = -1;
  function markCurrent(addr) {
    $$(".nav-item").forEach(function (a, i) {
      var on = a.dataset.target === addr;
      a.classList.toggle("current", on);
      if (on) navIndex = i;
    });
  }
  function navigator() {
    var items = $$(".nav-item");
    if (!items.length) return;
    document.addEventListener("keydown", function (e) {
      if (typing(e) || e.ctrlKey || e.metaKey || e.altKey) return;
      if (e.key !== "n" && e.key !== "p") return;
      navIndex = e.key === "n" ? (navIndex + 1) % items.length : (navIndex - 1 + items.length) % items.length;
      var a = items[navIndex];
      e.preventDefault();
      if (a.getAttribute("href").charAt(0) === "#") {
        if (location.hash === a.getAttribute("href")) openFragment(); else location.hash = a.getAttribute("href");
      } else location.href = a.href;
      a.scrollIntoView({ block: "nearest" });
    });
    items.forEach(function (a) {
      a.addEventListener("click", function (e) {
        if (a.getAttribute("href") === location.hash) { e.preventDefault(); openFragment(); }
      });
    });
  }

  // ---- Copy link ------------------------------------------------------
  function copyLinks() {
    $$("[data-copy-link]").forEach(function (b) {
      b.addEventListener("click", function () {
        var addr = b.getAttribute("data-copy-link");
        var u = location.origin + location.pathname + location.search + (addr ? "#" + addr : "");
        var done = function () { var t = b.textContent; b.textContent = "copied"; setTimeout(function () { b.textContent = t; }, 1200); };
        if (navigator.clipboard) navigator.clipboard.writeText(u).then(done, done); else done();
      });
    });
  }

  // ---- Comments: select text or click an argument row -----------------
  function offsetIn(leaf, node, off) {
    // Code points from the start of leaf to (node, off), skipping the
    // "… N more characters" summaries.
    var n = 0, w = document.createTreeWalker(leaf, NodeFilter.SHOW_TEXT, {
      acceptNode: function (t) { return t.parentElement.closest("[data-skip]") ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT; }
    }), t;
    while ((t = w.nextNode())) {
      if (t === node) return n + cpLen(t.data.slice(0, off));
      n += cpLen(t.data);
    }
    return n;
  }
  function comments() {
    var form = $("#comment-form");
    if (!form) return;
    var addrIn = $("#comment-address"), text = $("#comment-content");
    function target(addr) { addrIn.value = addr; text.focus(); }
    document.addEventListener("mouseup", function () {
      var s = window.getSelection();
      if (!s || s.isCollapsed || !s.rangeCount) return;
      var r = s.getRangeAt(0);
      var a = r.startContainer.parentElement && r.startContainer.parentElement.closest(".leaf[data-path]");
      var b = r.endContainer.parentElement && r.endContainer.parentElement.closest(".leaf[data-path]");
      if (!a || a !== b) return;
      var start = offsetIn(a, r.startContainer, r.startOffset), end = offsetIn(a, r.endContainer, r.endOffset);
      if (end > start) { addrIn.value = a.dataset.path + ":" + start + "-" + end; }
    });
    $$("tr[data-arg-address]").forEach(function (tr) {
      function pick(e) {
        if (window.getSelection && !window.getSelection().isCollapsed) return;
        if (e.type === "keydown" && e.key !== "Enter") return;
        target(tr.getAttribute("data-arg-address"));
      }
      tr.addEventListener("click", pick);
      tr.addEventListener("keydown", pick);
    });
  }

  // ---- Confirmations before destructive buttons --------------------------
  function confirms() {
    $$("[data-confirm]").forEach(function (b) {
      b.addEventListener("click", function (e) { if (!confirm(b.getAttribute("data-confirm"))) e.preventDefault(); });
    });
  }

  // ---- Upload with progress ------------------------------------------
  function upload() {
    var form = $("#new-dataset");
    if (!form) return;
    form.addEventListener("submit", function (e) {
      var file = $("#ds-file").files[0];
      if (!file) return;
      e.preventDefault();
      var name = $("#ds-name").value, bar = $("#upload-progress"), status = $("#upload-status");
      var fd = new FormData();
      fd.append("name", name);
      if (form.elements.is_public.checked) fd.append("is_public", "true");
      fd.append("file", file);
      var x = new XMLHttpRequest();
      x.open("POST", "/api/v1/dataset/upload");
      bar.hidden = false;
      x.upload.onprogress = function (ev) { if (ev.lengthComputable) { bar.value = Math.round(100 * ev.loaded / ev.total); status.textContent = bar.value + "% sent"; } };
      x.onload = function () {
        if (x.status >= 200 && x.status < 300) { location.href = "/u/" + encodeURIComponent(form.dataset.user || "") + "/" + encodeURIComponent(name); return; }
        var msg = "Upload failed (" + x.status + ")";
        try { msg = JSON.parse(x.responseText).detail || msg; } catch (err) { /* keep */ }
        status.textContent = msg; status.className = "error";
      };
      x.onerror = function () { status.textContent = "Upload failed: network error"; status.className = "error"; };
      x.send(fd);
    });
  }


  // ---- Findings: a accept, d dismiss, x select -------------------------
  function triage() {
    var form = $("#triage-form");
    if (!form || !$("button[name=action]", form)) return;
    document.addEventListener("keydown", function (e) {
      if (typing(e) || e.ctrlKey || e.metaKey || e.altKey || !window.vigilSelected) return;
      var row = window.vigilSelected();
      if (!row) return;
      var box = $("input[type=checkbox]", row);
      if (e.key === "x" && box) { box.checked = !box.checked; e.preventDefault(); return; }
      var action = { a: "accept", d: "dismiss" }[e.key];
      if (!action || !box) return;
      e.preventDefault();
      $$("input[name=id]", form).forEach(function (b) { b.checked = false; });
      box.checked = true;
      form.requestSubmit($("button[value=" + action + "]", form));
    });
  }

  // ---- Backtest: live progress over SSE, cancel, compare ---------------
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }
  function backtest() {
    var run = $("#bt-run");
    if (!run) return;
    var cancel = $("#bt-cancel"), box = $("#backtest"), bar = $("#bt-progress"), status = $("#bt-status"), list = $("#bt-triggered");
    var ctrl = null, base = run.dataset.base, dsid = run.dataset.datasetId;
    function traceLink(index, errors) {
      var href = base + "/t/" + index, ranges = [];
      (errors || []).forEach(function (er) { (er.ranges || []).forEach(function (r) { if (ranges.length < 20) ranges.push(r); }); });
      if (ranges.length) href += "?" + ranges.map(function (r) { return "hl=" + encodeURIComponent(r); }).join("&") + "#" + encodeURIComponent(ranges[0]);
      return href;
    }
    run.addEventListener("click", function () {
      if (ctrl) return;
      box.hidden = false; list.textContent = ""; $("#bt-compare-out").textContent = "";
      status.className = "muted"; status.textContent = "starting…"; bar.value = 0;
      ctrl = new AbortController(); cancel.disabled = false; run.disabled = true;
      var total = 0, done = 0, trig = 0, errs = 0;
      function show() { status.textContent = done + " / " + total + " traces checked, " + trig + " triggered, " + errs + " errors"; bar.max = Math.max(1, total); bar.value = done; }
      function finish(msg, bad) { ctrl = null; cancel.disabled = true; run.disabled = false; if (msg) { status.textContent = msg; if (bad) status.className = "error"; } }
      fetch("/api/v1/dataset/byid/" + encodeURIComponent(dsid) + "/policy-check/stream", {
        method: "POST", credentials: "same-origin", signal: ctrl.signal,
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ policy: $("#g-policy").value })
      }).then(function (resp) {
        if (!resp.ok) return resp.json().then(function (j) { finish(j.detail || ("backtest failed: " + resp.status), true); });
        var reader = resp.body.getReader(), dec = new TextDecoder(), buf = "";
        function frame(data) {
          var m = JSON.parse(data);
          if (m.metadata) { total = m.metadata.num_traces; show(); return; }
          if (m.done) { show(); finish("done: " + m.summary.num_traces + " traces, " + m.summary.num_triggered + " triggered, " + m.summary.num_errors + " errors in " + m.summary.duration_ms + " ms"); box.dataset.done = "1"; return; }
          done++;
          if (m.status === "error") errs++;
          if (m.triggered) {
            trig++;
            var li = el("li"), a = el("a", null, "trace #" + m.index);
            a.href = traceLink(m.index, m.errors);
            li.appendChild(a);
            if (m.errors && m.errors[0] && m.errors[0].args) li.appendChild(el("span", "muted", " " + String(m.errors[0].args[0])));
            list.appendChild(li);
          }
          show();
        }
        function pump() {
          return reader.read().then(function (r) {
            if (r.done) { if (ctrl) finish(); return; }
            buf += dec.decode(r.value, { stream: true });
            var i;
            while ((i = buf.indexOf("\n\n")) >= 0) {
              var chunk = buf.slice(0, i); buf = buf.slice(i + 2);
              chunk.split("\n").forEach(function (line) { if (line.indexOf("data: ") === 0) frame(line.slice(6)); });
            }
            return pump();
          });
        }
        return pump();
      }).catch(function (e) { finish(e.name === "AbortError" ? "cancelled" : "backtest failed: " + e.message, e.name !== "AbortError"); });
    });
    cancel.addEventListener("click", function () { if (ctrl) ctrl.abort(); });
    var cmp = $("#bt-compare");
    if (cmp) cmp.addEventListener("click", function () {
      box.hidden = false;
      var out = $("#bt-compare-out");
      out.textContent = "comparing…";
      fetch("/api/v1/dataset/byid/" + encodeURIComponent(dsid) + "/policy-check", {
        method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ policy: $("#g-policy").value, compare_to: { policy_id: cmp.dataset.policyId, version: Number(cmp.dataset.version) } })
      }).then(function (r) { return r.json().then(function (j) { return { ok: r.ok, j: j }; }); }).then(function (res) {
        out.textContent = "";
        if (!res.ok) { out.appendChild(el("p", "error", res.j.detail || "compare failed")); return; }
        var s = res.j.summary;
        out.appendChild(el("p", null, s.num_traces + " traces: this text triggers " + s.num_triggered + ", the current version " + s.baseline_triggered + "; " + s.newly_triggered + " newly triggered, " + s.no_longer_triggered + " no longer triggered."));
        [["Newly triggered", function (t) { return t.triggered && !t.baseline_triggered; }], ["No longer triggered", function (t) { return !t.triggered && t.baseline_triggered; }]].forEach(function (g) {
          var ts = (res.j.traces || []).filter(g[1]);
          if (!ts.length) return;
          out.appendChild(el("h3", null, g[0]));
          var ol = el("ol", "tree");
          ts.forEach(function (t) { var li = el("li"), a = el("a", null, "trace #" + t.index); a.href = traceLink(t.index, t.errors); li.appendChild(a); ol.appendChild(li); });
          out.appendChild(ol);
        });
      }).catch(function (e) { out.textContent = "compare failed: " + e.message; });
    });
  }


  // ---- Rule editor: line numbers that follow the text --------------------
  function editor() {
    var ta = $("#g-policy"), g = $("#g-gutter");
    if (!ta || !g) return;
    function lines() {
      var n = ta.value.split("\n").length;
      while (g.children.length < n) g.appendChild(el("span", "gl"));
      while (g.children.length > n) g.removeChild(g.lastChild);
    }
    function sync() { g.scrollTop = ta.scrollTop; }
    var release = false; // Esc, then Tab leaves the editor (no keyboard trap)
    ta.addEventListener("input", function () { release = false; lines(); });
    ta.addEventListener("scroll", sync);
    ta.addEventListener("keydown", function (e) {
      if (e.key === "Escape") { release = true; return; }
      if (e.key === "Tab" && !release && !e.shiftKey && !e.ctrlKey && !e.metaKey && !e.altKey) { // indent, as the language needs
        e.preventDefault();
        var s = ta.selectionStart;
        ta.setRangeText("    ", s, ta.selectionEnd, "end");
        lines();
      }
    });
    lines();
  }

  // ---- Playground: the state lives in the URL fragment ------------------
  function playground() {
    var form = $("#playground");
    if (!form) return;
    var p = $("#pg-policy"), t = $("#pg-trace");
    function save() {
      var st = "state=" + encodeURIComponent(JSON.stringify({ policy: p.value, trace: t.value }));
      history.replaceState(null, "", location.pathname + "#" + st);
      form.action = location.pathname + "#" + st;
    }
    if (location.hash.indexOf("#state=") === 0) {
      try {
        var st = JSON.parse(decodeURIComponent(location.hash.slice(7)));
        if (typeof st.policy === "string" && typeof st.trace === "string" && form.dataset.ran !== "1") {
          p.value = st.policy; t.value = st.trace;
        }
      } catch (e) { /* a broken link: keep the defaults */ }
    }
    p.addEventListener("input", save); t.addEventListener("input", save);
    save();
  }


  // ---- Ask box: post the form, show the answer page's answer in place --
  function ask() {
    var form = $("form[data-ask]"), out = $("#ask-result");
    if (!form || !out) return;
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      var btn = form.querySelector("button");
      btn.disabled = true; out.setAttribute("aria-busy", "true");
      out.textContent = "Asking…";
      fetch(form.action, { method: "POST", body: new FormData(form), credentials: "same-origin" })
        .then(function (r) { return r.text(); })
        .then(function (html) {
          var doc = new DOMParser().parseFromString(html, "text/html");
          var got = doc.querySelector("#ask-answer") || doc.querySelector("main .error") || doc.querySelector("main p");
          out.textContent = "";
          if (got) out.appendChild(document.importNode(got, true));
        })
        .catch(function () { out.textContent = "The question could not be sent; try again."; })
        .then(function () { btn.disabled = false; out.removeAttribute("aria-busy"); });
    });
    // A link to an address of this very page flashes it even when the
    // fragment is already the current one.
    out.addEventListener("click", function (e) {
      var a = e.target.closest ? e.target.closest("a[href]") : null;
      if (!a || a.pathname !== location.pathname || a.search !== location.search || !a.hash) return;
      if (a.hash === location.hash) { e.preventDefault(); openFragment(); }
    });
  }


  // ---- Proof badge: verify the run after the page has loaded -----------
  function proofBadge() {
    var b = $("a[data-verify]");
    if (!b) return;
    b.textContent = "verifying…";
    fetch(b.getAttribute("data-verify"), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (v) {
        if (!v) { b.textContent = "unverified"; return; }
        var s = v.valid ? "verified" : "tampered";
        b.textContent = s;
        b.className = "badge proof-" + s;
        b.title = v.valid ? "Every receipt of this run verifies" : "Verification failed; open the proof";
        b.setAttribute("href", b.getAttribute("href").replace(/\?verify=1$/, "") + (v.valid ? "" : "?verify=1"));
      })
      .catch(function () { b.textContent = "unverified"; });
  }


  // ---- Trace list: load the sidebar counts of a large dataset ---------
  function facets() {
    var el = $("[data-facets]");
    if (!el) return;
    fetch(el.getAttribute("data-facets"), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) return;
        var got = new DOMParser().parseFromString(html, "text/html").getElementById("facets");
        if (got) el.replaceWith(document.importNode(got, true));
      })
      .catch(function () { /* keep the link */ });
  }

  var features = [listNav, navigator, copyLinks, comments, confirms, upload, triage, backtest, editor, playground, ask, proofBadge, facets];
  window.vigilFeatures = features;
  document.addEventListener("DOMContentLoaded", function () {
    features.forEach(function (f) { f(); });
    openFragment();
    window.addEventListener("hashchange", openFragment);
  });
})();
