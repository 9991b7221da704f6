/*
 * goodput.js - the Run view's Goodput panel: where the wall time went,
 * one stacked bar per attempt (GET /api/runs/{id}/goodput,
 * docs/fault-tolerance.md); hidden when the run has no goodput document.
 */
(function (ss) {
  'use strict';

  var $ = ss.$, esc = ss.esc, fmtDuration = ss.fmtDuration;

  var GOODPUT_LABELS = {
    productive: 'productive', startup: 'start-up', checkpoint: 'checkpoint',
    lost_work: 'lost work', restart: 'restart', hang: 'hang',
    data_stall: 'data stall', straggler: 'stragglers', other: 'other'
  };

  /* One stacked bar per attempt: its wall time by category. */
  function renderGoodput() {
    var st = ss.st;
    var g = st && st.goodput, panel = $('#panel-goodput');
    panel.hidden = !g || !g.attempts || !g.attempts.length;
    if (panel.hidden) return;
    var cats = Object.keys(GOODPUT_LABELS);
    function bar(ms, wall) {
      return '<div class="gp-bar">' + cats.map(function (c) {
        var v = ms[c] || 0, pct = wall > 0 ? 100 * v / wall : 0;
        return pct <= 0 ? '' : '<span class="gp-' + c + '" style="width:' + pct.toFixed(3) +
          '%" title="' + esc(GOODPUT_LABELS[c] + ': ' + fmtDuration(v / 1000) + ' (' + pct.toFixed(1) + ' %)') + '"></span>';
      }).join('') + '</div>';
    }
    var html = '<div class="gp-total">goodput <b>' + (100 * g.goodput).toFixed(1) + ' %</b> of ' +
      fmtDuration(g.wall_ms / 1000) + (g.running ? ' so far' : '') + '</div>';
    html += g.attempts.map(function (a) {
      return '<div class="gp-row"><span class="gp-label">attempt ' + a.attempt +
        (a.cause ? ' · ' + esc(a.cause) : '') +
        (a.resumed_from !== null ? ' · resumed from ' + a.resumed_from : '') + '</span>' +
        bar(a.ms, a.wall_ms) + '</div>';
    }).join('');
    html += '<div class="legend">' + cats.map(function (c) {
      return '<span class="swatch gp-' + c + '"></span><span>' + GOODPUT_LABELS[c] + '</span>';
    }).join('') + '</div>';
    $('#goodput').innerHTML = html;
  }

  ss.goodput = { render: renderGoodput };
})(window.ssDash);
