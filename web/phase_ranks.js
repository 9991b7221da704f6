/*
 * phase_ranks.js - "Phases by rank", under the Phases chart: for the steps
 * shown (the charts' zoom, else every step of the heat map's window), each
 * rank's mean self time in each phase, as one bar per rank.  The phase
 * chart draws the median rank and the worst rank per step; a rank whose
 * own phase is slow, and whom the others wait for in a collective, shows
 * there only as a dot under the others' wait.  Here its bar is the long
 * one in its phase, and the ranks the findings blame are marked.
 *
 * Reads ssDash.st.heat (per-rank self time per phase, /heatmap's
 * phase_self_ms) and the charts' zoom (ssDash.charts.range()).  Large
 * worlds show the blamed ranks and the ranks with the longest time in
 * each phase, up to MAX_RANKS, and say how many are left out.
 */
(function (ss) {
  'use strict';

  var MAX_RANKS = 16;
  var $ = ss.$, esc = ss.esc, isNum = ss.isNum, fmtMs = ss.fmtMs, fmtInt = ss.fmtInt;

  /* Column indexes of the heat window inside RANGE ([first, last] step;
   * null: all). */
  function columns(h, range) {
    var out = [];
    for (var c = 0; c < h.steps.length; c++) {
      if (!range || (h.steps[c] >= range[0] && h.steps[c] <= range[1])) out.push(c);
    }
    return out;
  }

  function mean(row, cols) {
    var s = 0, n = 0;
    for (var i = 0; i < cols.length; i++) {
      var v = row[cols[i]];
      if (isNum(v)) { s += v; n++; }
    }
    return n ? s / n : null;
  }

  function render() {
    var st = ss.st, el = $('#phase-ranks');
    var h = st && st.heat;
    var names = h ? Object.keys(h.phases || {}).sort() : [];
    if (!h || !names.length || !h.steps.length) {
      el.innerHTML = '<div class="empty">' + (st && st.run ? 'No per-rank phase times recorded.' : 'Loading…') + '</div>';
      document.body.dataset.phaseRanks = 0;
      return;
    }
    var range = ss.charts.range();
    var cols = columns(h, range);
    if (!cols.length) cols = columns(h, null);
    var blamed = ss.findings.blamedRanks();
    var head = ss.findings.headline();
    /* means[name][r] */
    var means = {}, top = 0;
    names.forEach(function (name) {
      means[name] = h.phases[name].map(function (row) { return mean(row, cols); });
      means[name].forEach(function (v) { if (isNum(v) && v > top) top = v; });
    });
    /* which ranks: all of a small world; else the blamed and the longest */
    var shown = {}, nShown = 0;
    if (h.ranks.length <= MAX_RANKS) {
      h.ranks.forEach(function (r, i) { shown[i] = true; });
      nShown = h.ranks.length;
    } else {
      h.ranks.forEach(function (r, i) { if (blamed[r] !== undefined && nShown < MAX_RANKS) { shown[i] = true; nShown++; } });
      var order = h.ranks.map(function (r, i) {
        var worst = 0;
        names.forEach(function (name) { var v = means[name][i]; if (isNum(v) && v > worst) worst = v; });
        return [worst, i];
      }).sort(function (a, b) { return b[0] - a[0]; });
      for (var k = 0; k < order.length && nShown < MAX_RANKS; k++) {
        if (!shown[order[k][1]]) { shown[order[k][1]] = true; nShown++; }
      }
    }
    var bars = 0;
    var html = names.map(function (name) {
      var blamedPhase = head && head.phase === name;
      var rows = '';
      for (var i = 0; i < h.ranks.length; i++) {
        if (!shown[i]) continue;
        var v = means[name][i], rank = h.ranks[i];
        var pct = isNum(v) && top > 0 ? Math.max(0.5, 100 * v / top) : 0;
        var cls = 'pr-bar' + (blamed[rank] !== undefined ? ' blamed ' + esc(blamed[rank]) : '');
        rows += '<div class="pr-row"><span class="pr-rank">rank ' + esc(rank) + '</span>' +
                '<span class="pr-track"><span class="' + cls + '" data-rank="' + esc(rank) +
                '" data-phase="' + esc(name) + '" data-ms="' + (isNum(v) ? v.toFixed(3) : '') +
                '" style="width:' + pct.toFixed(2) + '%"></span></span>' +
                '<span class="pr-ms">' + fmtMs(v) + '</span></div>';
        if (isNum(v)) bars++;
      }
      return '<div class="pr-phase' + (blamedPhase ? ' blamed-phase' : '') + '"><div class="pr-name">' + esc(name) +
             (blamedPhase ? ' <span class="pr-note">the headline\u2019s phase</span>' : '') + '</div>' + rows + '</div>';
    }).join('');
    el.innerHTML = html;
    var first = h.steps[cols[0]], last = h.steps[cols[cols.length - 1]];
    $('#phase-ranks-hint').textContent = 'each rank\u2019s mean self time per phase over steps ' + fmtInt(first) + '–' + fmtInt(last) +
      (range ? ' (the charts\u2019 zoom)' : '') +
      (nShown < h.ranks.length ? ' · ' + nShown + ' of ' + h.ranks.length + ' ranks: the blamed and the longest' : '');
    document.body.dataset.phaseRanks = bars;
    document.body.dataset.phaseRanksSteps = first + '-' + last;
  }

  ss.phaseRanks = { render: render };
})(window.ssDash);
