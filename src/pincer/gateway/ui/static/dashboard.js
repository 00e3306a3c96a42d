// Live parts of the dashboard: an element with data-live-source listens to that server-sent
// event stream and, on each data-live-event, fetches data-live-fetch (server-rendered, escaped
// HTML) into itself with htmx. Times: every <time class="when" datetime> is shown in the
// viewer's local time (the page says UTC without JavaScript) and its age is kept current.
// Without JavaScript the pages work as plain pages and forms.
"use strict";
(function () {
  var format = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });

  function ago(ms) {
    var s = Math.abs(ms) / 1000;
    var text = s < 60 ? Math.floor(s) + " s" : s < 3600 ? Math.floor(s / 60) + " min"
      : s < 86400 ? Math.floor(s / 3600) + " h" : Math.floor(s / 86400) + (s < 172800 ? " day" : " days");
    if (s < 1) return "just now";
    return ms > 0 ? text + " ago" : "in " + text;
  }

  function localise(root) {
    root.querySelectorAll("time.when[datetime]").forEach(function (el) {
      var at = new Date(el.getAttribute("datetime"));
      if (isNaN(at.getTime())) return;
      if (!el.hasAttribute("title")) el.setAttribute("title", el.textContent);
      el.textContent = format.format(at);
      var age = el.nextElementSibling;
      if (age && age.classList.contains("age")) age.textContent = ago(Date.now() - at.getTime());
    });
  }

  function follow(element) {
    var source = new EventSource(element.getAttribute("data-live-source"));
    var kind = element.getAttribute("data-live-event") || "message";
    source.addEventListener(kind, function () {
      window.htmx.ajax("GET", element.getAttribute("data-live-fetch"), { target: element, swap: "innerHTML" });
    });
    element.setAttribute("data-live", "connected");
    source.onerror = function () { element.setAttribute("data-live", "reconnecting"); };
    source.onopen = function () { element.setAttribute("data-live", "connected"); };
  }

  function start() {
    localise(document);
    document.querySelectorAll("[data-live-source]").forEach(follow);
    document.body.addEventListener("htmx:afterSwap", function (event) { localise(event.target); });
    window.setInterval(function () { localise(document); }, 30000);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
