/*
 * rank_recent.js - "Latest steps of rank R", under the Ranks table: a
 * click on a rank's number asks the live run for that rank's latest steps
 * (GET /api/runs/{id}/recent, answered by node 0 or the rank's node's
 * agent: docs/multinode.md, "A rank's recent steps") and shows them, the
 * newest first: each step's time, its phases and its largest RSS.  It is
 * every step the rank's node keeps, where the store may keep a row of it
 * every few steps only.  While the run stays live the panel asks again
 * every REFRESH_MS (one request at a time; a failed refresh keeps the
 * rows drawn and says so); a stored run or a report has no live
 * controller to ask, and the panel says so.
 */
(function (ss) {
  'use strict';

  var STEPS = 64;
  var REFRESH_MS = 2000;
  var $ = ss.$, esc = ss.esc, isNum = ss.isNum, fmtMs = ss.fmtMs, fmtInt = ss.fmtInt,
      fmtBytes = ss.fmtBytes;
  var asking = 0;     /* the latest request's number: older answers are dropped */
  var shown = null;   /* {run, rank} while the panel follows a live rank */
  var inFlight = false;
  var timer = null;

  function panel() { return $('#panel-rank-recent'); }

  function say(title, msg) {
    $('#rank-recent-title').textContent = title;
    $('#rank-recent').innerHTML = '<div class="empty">' + esc(msg) + '</div>';
  }

  function draw(doc) {
    var names = [];
    doc.rows.forEach(function (r) {
      Object.keys(r.phases).forEach(function (n) { if (names.indexOf(n) < 0) names.push(n); });
    });
    var who = doc.from === 'agent' ? 'node ' + doc.node + "'s agent" : 'the controller (node 0)';
    $('#rank-recent-title').textContent = 'Latest steps of rank ' + doc.rank;
    $('#rank-recent-hint').textContent = fmtInt(doc.kept) + ' of the ' + fmtInt(doc.recorded) +
      ' steps it recorded, newest first; ' + who + ' keeps its latest ' + fmtInt(doc.capacity);
    if (!doc.rows.length) {
      $('#rank-recent').innerHTML = '<div class="empty">No step recorded yet.</div>';
      return;
    }
    var head = '<tr><th class="num">Step</th><th class="num">Attempt</th><th class="num">Step time</th>' +
      names.map(function (n) { return '<th class="num">' + esc(n) + '</th>'; }).join('') +
      '<th class="num">Max RSS</th></tr>';
    var body = doc.rows.slice().reverse().map(function (r) {
      return '<tr><td class="num">' + fmtInt(r.step) + '</td><td class="num">' + esc(r.attempt) +
        '</td><td class="num">' + fmtMs(r.step_ms) + '</td>' +
        names.map(function (n) {
          var v = r.phases[n];
          return '<td class="num">' + (isNum(v) ? fmtMs(v) : '<span class="dash">–</span>') + '</td>';
        }).join('') +
        '<td class="num">' + (isNum(r.rss_bytes) ? fmtBytes(r.rss_bytes) : '<span class="dash">–</span>') +
        '</td></tr>';
    }).join('');
    $('#rank-recent').innerHTML = '<div class="table-wrap"><table class="grid" id="rank-recent-table">' +
      '<thead>' + head + '</thead><tbody>' + body + '</tbody></table></div>';
  }

  function live(st) {
    return !ss.STATIC && st && st.run && st.run.live;
  }

  /* Asks for the followed rank's latest steps and draws them. */
  function ask() {
    var st = ss.st, want = shown, n = ++asking;
    if (!want || !live(st) || st.id !== want.run) {
      stop();
      return;
    }
    inFlight = true;
    ss.api('runs/' + want.run + '/recent?rank=' + want.rank + '&steps=' + STEPS).then(function (doc) {
      if (n !== asking) return;
      draw(doc);
      document.body.dataset.rankRecent = doc.rank + ':' + doc.rows.length;
      want.drawn = true;
    }).catch(function (err) {
      if (n !== asking) return;
      var msg = String(err && err.message || err);
      if (want.drawn) {
        /* the rows drawn stay; the hint says they are no longer fresh */
        $('#rank-recent-hint').textContent = 'not refreshed: ' + msg;
        return;
      }
      say('Latest steps of rank ' + want.rank, msg);
      document.body.dataset.rankRecent = want.rank + ':error';
    }).then(function () { inFlight = false; });
  }

  function stop() {
    shown = null;
    if (timer) clearInterval(timer);
    timer = null;
  }

  /* Shows rank RANK's latest steps, and follows them while the run is live. */
  function show(rank) {
    var st = ss.st;
    stop();
    ++asking;
    panel().hidden = false;
    $('#rank-recent-hint').textContent = '';
    document.body.dataset.rankRecent = '';
    if (!live(st)) {
      say('Latest steps of rank ' + rank, 'A rank\'s latest steps come from a running job\'s ' +
          'controller; this run is not live here.');
      return;
    }
    say('Latest steps of rank ' + rank, 'Asking…');
    shown = { run: st.id, rank: rank, drawn: false };
    ask();
    timer = setInterval(function () { if (!inFlight) ask(); }, REFRESH_MS);
  }

  /* A click in the Ranks table: on a rank's number, its latest steps. */
  function onClick(ev) {
    var b = ev.target.closest('button.rank-pick');
    if (b) show(+b.dataset.rank);
  }

  ss.rankRecent = { show: show, onClick: onClick };
})(window.ssDash);
