/*
 * events.js - the Run view's event list: the run's latest 300 events,
 * newest first, routine ones muted and failures marked.
 */
(function (ss) {
  'use strict';

  var ROUTINE_EVENTS = { run_started: 1, rank_connected: 1, rank_exited: 1 };
  var BAD_EVENTS = { rank_failed: 1, rank_missing: 1, rank_never_connected: 1,
                     rejected_connection: 1, refused_records: 1 };
  var $ = ss.$, esc = ss.esc, isNum = ss.isNum, fmtTimeMs = ss.fmtTimeMs;

  function renderEvents() {
    var st = ss.st;
    var el = $('#events');
    if (!st || !st.events.length) {
      el.innerHTML = '<li class="muted">' + (st && st.run ? 'No events.' : '') + '</li>';
      return;
    }
    var html = '';
    for (var i = st.events.length - 1, n = 0; i >= 0 && n < 300; i--, n++) {
      var e = st.events[i];
      var cls = ROUTINE_EVENTS[e.kind] ? 'routine' : BAD_EVENTS[e.kind] ? 'bad' : '';
      html += '<li class="' + cls + '"><span class="at">' + fmtTimeMs(e.at) + '</span>' +
              '<span class="rk">' + (isNum(e.rank) ? 'rank ' + e.rank : '') + '</span>' +
              '<span class="kind">' + esc(String(e.kind).replace(/_/g, ' ')) + '</span>' +
              '<span class="msg">' + (e.message ? esc(e.message) : '') + '</span></li>';
    }
    el.innerHTML = html;
  }

  ss.events = { render: renderEvents };
})(window.ssDash);
