/*
 * ranks.js - the Run view's ranks table: each rank's state, host, pid,
 * last step and phase, when it was last heard from (live runs), median
 * step, largest RSS, dropped data and, over the host window, its median
 * run-queue delay and stopped time; ranks a finding blames are marked.
 * While the run is live a rank's number is a button: its latest steps
 * (rank_recent.js).
 */
(function (ss) {
  'use strict';

  var $ = ss.$, esc = ss.esc, isNum = ss.isNum, fmtMs = ss.fmtMs, fmtBytes = ss.fmtBytes,
      fmtInt = ss.fmtInt, dash = ss.dash, median = ss.median;

  /* RANK's median per step of host series ROWS over the host window. */
  function hostMedian(rows, rank) {
    var st = ss.st;
    var h = st.host;
    if (!h) return null;
    var k = h.ranks.indexOf(rank);
    return k < 0 ? null : median(rows[k] || []);
  }

  /* RANK's stopped time: its median per step and in how many steps. */
  function stoppedCell(rank) {
    var st = ss.st;
    var h = st.host, k = h ? h.ranks.indexOf(rank) : -1;
    if (k < 0) return '<span class="dash">–</span>';
    var row = h.stopped[k] || [], known = row.filter(isNum);
    if (!known.length) return '<span class="dash">–</span>';
    var hit = known.filter(function (v) { return v > 0; }).length;
    return fmtMs(median(known)) + (hit ? ' · ' + hit + '/' + known.length + ' steps' : '');
  }

  function renderRanks() {
    var st = ss.st;
    var body = $('#ranks tbody');
    if (!st || !st.ranks.length) {
      body.innerHTML = '<tr><td colspan="12" class="muted">' + (st && st.run ? 'No ranks recorded.' : 'Loading…') + '</td></tr>';
      return;
    }
    var blamed = ss.findings.blamedRanks(), live = !ss.STATIC && st.run && st.run.live && !st.lost;
    body.innerHTML = st.ranks.map(function (r) {
      var state = r.state || 'unknown';
      var exit = '';
      if (isNum(r.signal) && r.signal > 0) exit = ' (signal ' + r.signal + ')';
      else if (isNum(r.exit_code) && r.exit_code !== 0) exit = ' (exit ' + r.exit_code + ')';
      var drops = (r.dropped_events == null && r.dropped_records == null) ? null
                : (r.dropped_events || 0) + (r.dropped_records || 0) === 0 ? '0'
                : fmtInt(r.dropped_events || 0) + ' events, ' + fmtInt(r.dropped_records || 0) + ' records';
      return '<tr class="' + (blamed[r.rank] !== undefined ? 'blamed' : '') + '">' +
        '<td class="num">' + (live ? '<button class="rank-pick" data-rank="' + esc(r.rank) +
          '" title="its latest steps, every one, from its node">' + esc(r.rank) + '</button>'
          : esc(r.rank)) + '</td>' +
        '<td class="nowrap"><span class="state ' + esc(state) + '">' + esc(state.replace(/_/g, ' ')) + '</span>' + esc(exit) + '</td>' +
        '<td>' + dash(r.host, esc) + '</td>' +
        '<td class="num">' + dash(r.pid, esc) + '</td>' +
        '<td class="num">' + dash(r.last_step, fmtInt) + '</td>' +
        '<td>' + (r.phase ? esc(r.phase) : '<span class="dash">–</span>') + '</td>' +
        '<td class="num">' + (live && isNum(r.last_heard_s) ? fmtAgo(r.last_heard_s) : '<span class="dash">–</span>') + '</td>' +
        '<td class="num">' + dash(r.median_step_ms, fmtMs) + '</td>' +
        '<td class="num">' + dash(r.max_rss_bytes, fmtBytes) + '</td>' +
        '<td class="num">' + (drops === null ? '<span class="dash">–</span>' : drops) + '</td>' +
        '<td class="num">' + dash(hostMedian(st.host ? st.host.runq : [], r.rank), fmtMs) + '</td>' +
        '<td class="num nowrap">' + stoppedCell(r.rank) + '</td></tr>';
    }).join('');
  }

  function fmtAgo(s) {
    if (s < 0) return '<span class="dash">never</span>';
    return (s < 10 ? s.toFixed(1) : Math.round(s)) + ' s ago';
  }

  ss.ranks = { render: renderRanks };
})(window.ssDash);
