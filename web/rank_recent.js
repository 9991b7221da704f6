/*
 * rank_recent.js - "Latest steps of rank R", under the Ranks table: a
 * click on a rank's number asks the live run for that rank's latest steps
 * (GET /api/runs/{id}/recent, answered by node 0 or the rank's node's
 * agent: docs/multinode.md, "A rank's recent steps") and shows them, the
 * newest first: each step's time, its phases and its largest RSS.  It is
 * every step the rank's node keeps, where the store may keep a row of it
 * every few steps only.  A click on the same rank asks again; a stored
 * run or a report has no live controller to ask, and the panel says so.
 */
(function (ss) {
  'use strict';

  var STEPS = 64;
  var $ = ss.$, esc = ss.esc, isNum = ss.isNum, fmtMs = ss.fmtMs, fmtInt = ss.fmtInt,
      fmtBytes = ss.fmtBytes;
  var asking = 0; /* the latest request's number: older answers are dropped */

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

  /* Shows rank RANK's latest steps. */
  function show(rank) {
    var st = ss.st, n = ++asking;
    panel().hidden = false;
    $('#rank-recent-hint').textContent = '';
    document.body.dataset.rankRecent = '';
    if (ss.STATIC || !st || !st.run || !st.run.live) {
      say('Latest steps of rank ' + rank, 'A rank\'s latest steps come from a running job\'s ' +
          'controller; this run is not live here.');
      return;
    }
    say('Latest steps of rank ' + rank, 'Asking…');
    ss.api('runs/' + st.id + '/recent?rank=' + rank + '&steps=' + STEPS).then(function (doc) {
      if (n !== asking) return;
      draw(doc);
      document.body.dataset.rankRecent = doc.rank + ':' + doc.rows.length;
    }).catch(function (err) {
      if (n !== asking) return;
      say('Latest steps of rank ' + rank, String(err && err.message || err));
      document.body.dataset.rankRecent = rank + ':error';
    });
  }

  /* A click in the Ranks table: on a rank's number, its latest steps. */
  function onClick(ev) {
    var b = ev.target.closest('button.rank-pick');
    if (b) show(+b.dataset.rank);
  }

  ss.rankRecent = { show: show, onClick: onClick };
})(window.ssDash);
