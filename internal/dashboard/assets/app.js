// Kube dashboard: live updates over one server-sent-event stream per page.
// The stream is read with fetch (not EventSource) so that a 401 stops it for good and
// every other failure reconnects with exponential back-off and jitter (1 s doubling to
// 30 s): an expired session never turns into a reconnect flood.
(function () {
  'use strict';
  var body = document.body;
  var streamURL = body.getAttribute('data-stream');
  var live = document.getElementById('live');
  var backoff = 1000;
  var stopped = false;
  var pending = null;
  var refreshes = 0;
  var readies = 0;

  function state(s, title) {
    if (live) {
      live.setAttribute('data-state', s);
      live.title = title || s;
    }
  }

  function stop(msg) {
    stopped = true;
    state('stopped', msg);
    if (!document.getElementById('ended')) {
      var p = document.createElement('p');
      p.id = 'ended';
      p.className = 'flash';
      p.textContent = msg + ' ';
      var a = document.createElement('a');
      a.href = '/ui/login?next=' + encodeURIComponent(location.pathname + location.search);
      a.textContent = 'Log in again';
      p.appendChild(a);
      body.insertBefore(p, document.getElementById('content'));
    }
  }

  function refresh() {
    fetch(location.href, { headers: { 'X-Kube-Fragment': '1' }, credentials: 'same-origin', cache: 'no-store' })
      .then(function (res) {
        if (res.status === 401) { stop('Your session has ended.'); return null; }
        return res.ok ? res.text() : null;
      })
      .then(function (html) {
        if (html === null) { return; }
        document.getElementById('content').innerHTML = html;
        refreshes++;
        body.setAttribute('data-refreshes', String(refreshes));
      })
      .catch(function () {});
  }

  function schedule() {
    if (pending) { return; }
    pending = setTimeout(function () { pending = null; refresh(); }, 100);
  }

  function retry() {
    if (stopped) { return; }
    var wait = backoff / 2 + Math.random() * backoff / 2;
    backoff = Math.min(backoff * 2, 30000);
    state('retrying', 'reconnecting in ' + Math.round(wait / 1000) + ' s');
    setTimeout(connect, wait);
  }

  function handle(block) {
    var ev = 'message';
    var lines = block.split('\n');
    for (var i = 0; i < lines.length; i++) {
      var l = lines[i];
      if (l.indexOf('event:') === 0) { ev = l.slice(6).trim(); }
    }
    if (ev === 'change') { schedule(); }
    // A stream that started again missed what changed while it was down: refresh once.
    if (ev === 'ready' && ++readies > 1) { schedule(); }
  }

  function connect() {
    if (!streamURL || stopped) { return; }
    var started = Date.now();
    fetch(streamURL, { headers: { Accept: 'text/event-stream' }, credentials: 'same-origin', cache: 'no-store' })
      .then(function (res) {
        if (res.status === 401) { stop('Your session has ended.'); return; }
        if (!res.ok || !res.body) { retry(); return; }
        state('live', 'live updates on');
        var reader = res.body.getReader();
        var dec = new TextDecoder();
        var buf = '';
        function pump() {
          return reader.read().then(function (r) {
            if (r.done) { throw new Error('stream ended'); }
            buf += dec.decode(r.value, { stream: true });
            var i;
            while ((i = buf.indexOf('\n\n')) >= 0) {
              handle(buf.slice(0, i));
              buf = buf.slice(i + 2);
            }
            return pump();
          });
        }
        return pump();
      })
      .catch(function () {
        // A stream that lived a while earns a fresh back-off; one that failed at once does not.
        if (Date.now() - started > 30000) { backoff = 1000; }
        retry();
      });
  }

  // Live updates start once the page is shown: the first paint does not wait on the stream.
  if (document.readyState === 'complete') {
    setTimeout(connect, 0);
  } else {
    window.addEventListener('load', function () { setTimeout(connect, 0); });
  }
})();
