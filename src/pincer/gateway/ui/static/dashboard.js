// Live parts of the dashboard: an element with data-live-source listens to that server-sent
// event stream and, on each data-live-event, fetches data-live-fetch (server-rendered, escaped
// HTML) into itself with htmx. Without JavaScript the pages work as plain pages and forms.
"use strict";
(function () {
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
    document.querySelectorAll("[data-live-source]").forEach(follow);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
