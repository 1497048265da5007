// agentplane console: live updates. Pages work without this script; with
// it, the element #live with a data-live attribute is kept current:
//   data-live="poll"        the page is fetched again every few seconds;
//   data-live="sse:<url>"   an event stream is followed, and each event
//                            fetches the page again.
// The fresh page's #live replaces the old one; an empty data-live stops it.
(function () {
  'use strict';
  var POLL_MS = 3000;
  var stream = null;
  var timer = null;
  var fetching = false;
  var again = false;

  function refresh() {
    if (fetching) { again = true; return; }
    fetching = true;
    fetch(window.location.href, { credentials: 'same-origin', headers: { 'Accept': 'text/html' } })
      .then(function (res) {
        if (!res.ok) { throw new Error('status ' + res.status); }
        return res.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, 'text/html');
        var fresh = doc.getElementById('live');
        var old = document.getElementById('live');
        if (fresh && old) {
          // Keep open what the reader opened.
          var open = {};
          old.querySelectorAll('details[open]').forEach(function (d, i) { open[detailsKey(d, i)] = true; });
          fresh.querySelectorAll('details').forEach(function (d, i) { if (open[detailsKey(d, i)]) { d.open = true; } });
          old.replaceWith(document.importNode(fresh, true));
          document.dispatchEvent(new CustomEvent('console:updated'));
        }
        start();
      })
      .catch(function () { stop(); timer = setTimeout(refresh, POLL_MS * 2); })
      .finally(function () {
        fetching = false;
        if (again) { again = false; refresh(); }
      });
  }

  function detailsKey(d, i) {
    var li = d.closest('[id]');
    return (li ? li.id : '') + '/' + (d.querySelector('summary') || {}).textContent + '/' + i;
  }

  function stop() {
    if (timer) { clearTimeout(timer); timer = null; }
    if (stream) { stream.close(); stream = null; }
  }

  function start() {
    var live = document.getElementById('live');
    var mode = live ? live.getAttribute('data-live') || '' : '';
    if (mode === 'poll') {
      if (stream) { stream.close(); stream = null; }
      if (timer) { clearTimeout(timer); }
      timer = setTimeout(refresh, POLL_MS);
    } else if (mode.indexOf('sse:') === 0) {
      if (timer) { clearTimeout(timer); timer = null; }
      if (!stream) {
        stream = new EventSource(mode.slice(4), { withCredentials: true });
        stream.onmessage = refresh;
        ['step', 'complete', 'waiting', 'error'].forEach(function (t) { stream.addEventListener(t, refresh); });
        stream.onerror = function () { if (stream && stream.readyState === EventSource.CLOSED) { stream = null; refresh(); } };
      }
    } else {
      stop();
    }
  }

  document.addEventListener('DOMContentLoaded', start);
})();
