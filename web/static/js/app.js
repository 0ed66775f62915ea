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
    $$("[data-comment-delete]").forEach(function (b) {
      b.addEventListener("click", function (e) { if (!confirm("Delete this comment?")) e.preventDefault(); });
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

  var features = [listNav, navigator, copyLinks, comments, upload];
  window.vigilFeatures = features;
  document.addEventListener("DOMContentLoaded", function () {
    features.forEach(function (f) { f(); });
    openFragment();
    window.addEventListener("hashchange", openFragment);
  });
})();
