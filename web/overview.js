/*
 * overview.js - the Run view's head: the status pill, title, meta line
 * and command, and the summary cards; and render(), which draws every part
 * of the Run view from ssDash.st (then hands the run to values.js, the
 * Vectors panel).
 */
(function (ss) {
  'use strict';

  var STATIC = ss.STATIC;
  var $ = ss.$, esc = ss.esc, isNum = ss.isNum, fmtMs = ss.fmtMs, fmtMsParts = ss.fmtMsParts,
      fmtInt = ss.fmtInt, fmtTime = ss.fmtTime, fmtDuration = ss.fmtDuration;

  /* Draws the whole Run view of the run shown. */
  function render() {
    var st = ss.st;
    renderHeader();
    ss.findings.render();
    renderCards();
    ss.charts.render();
    ss.heat.render();
    ss.phaseRanks.render();
    ss.host.render();
    ss.goodput.render();
    ss.ranks.render();
    ss.events.render();
    /* the workload panels below the findings (core.js registerPanel) */
    ss.panels.forEach(function (draw) { draw(st, $('#panels')); });
    /* the vectors' heat maps: values.js */
    if (window.ssValues && st.run) {
      window.ssValues.update({ runId: st.id, api: STATIC ? null : ss.api, live: ss.following(),
                               data: STATIC ? STATIC.values || { list: { values: [] } } : null });
    }
    var b = document.body.dataset;
    if (st.run) b.state = 'ready';
  }

  function renderHeader() {
    var st = ss.st;
    var run = st && st.run;
    var pill = $('#run-status');
    if (!run) {
      pill.className = 'pill';
      pill.textContent = '';
      return;
    }
    var live = !STATIC && run.live;
    if (st.lost) {
      pill.className = 'pill lost';
      pill.textContent = st.ended ? 'ended' : 'disconnected';
    } else {
      pill.className = 'pill ' + (live ? 'live' : run.status);
      pill.textContent = live ? 'live' : String(run.status).replace(/_/g, ' ');
    }
    $('#run-title').innerHTML = esc(run.name) + ' <span class="id">#' + esc(run.id) + '</span>';
    document.title = run.name + ' #' + run.id + ' · stepscope';
    var meta = [];
    meta.push(fmtInt(run.world_size) + (run.world_size === 1 ? ' rank' : ' ranks'));
    if (run.host) meta.push('on ' + esc(run.host));
    meta.push('started ' + fmtTime(run.started_at, true));
    var t0 = Date.parse(run.started_at), t1 = run.ended_at ? Date.parse(run.ended_at) : Date.now();
    if (isNum(t0) && isNum(t1)) meta.push((run.ended_at ? 'ran ' : 'running for ') + fmtDuration((t1 - t0) / 1000));
    if (isNum(run.exit_code)) meta.push('exit code ' + run.exit_code);
    if (isNum(run.attempts) && run.attempts > 1) meta.push('attempt ' + esc(run.attempt) + ' of ' + run.attempts);
    $('#run-meta').innerHTML = meta.map(function (m) { return '<span>' + m + '</span>'; }).join('');
    $('#run-command').textContent = run.command || '';
  }

  function card(label, valueHtml, sub, cls) {
    return '<div class="card' + (cls ? ' ' + cls : '') + '"><div class="label">' + esc(label) +
           '</div><div class="value">' + valueHtml + '</div><div class="sub">' + (sub || '&nbsp;') + '</div></div>';
  }

  function renderCards() {
    var st = ss.st;
    var el = $('#cards');
    if (!st || !st.run) { el.innerHTML = ''; return; }
    var sm = (st.summary && st.summary.step_ms) || {};
    var med = sm.median_rank || {}, worst = sm.worst_rank || {};
    var steps = st.summary && isNum(st.summary.steps) ? st.summary.steps : st.x.length;
    var first = st.summary && isNum(st.summary.first_step) ? st.summary.first_step : null;
    var range = st.x.length ? 'steps ' + fmtInt(st.x[0]) + '–' + fmtInt(st.x[st.x.length - 1]) +
                (first !== null && st.x[0] > first ? ' in the charts' : '') : 'none finalized yet';
    var html = card('Steps finalized', fmtInt(steps), range);
    html += card('Median-rank step', fmtMsParts(med.p50), 'p90 ' + fmtMs(med.p90) + ' · p99 ' + fmtMs(med.p99));
    html += card('Worst-rank step', fmtMsParts(worst.p50), 'p90 ' + fmtMs(worst.p90) + ' · p99 ' + fmtMs(worst.p99));
    if (isNum(med.p50) && isNum(worst.p50) && med.p50 > 0) {
      var pct = (worst.p50 / med.p50 - 1) * 100;
      html += card('Waiting for the slowest', '+' + pct.toFixed(pct < 10 ? 1 : 0) + '<small>%</small>',
                   'worst-rank over median-rank p50', pct >= 30 ? 'bad' : pct >= 10 ? 'warn' : '');
    } else {
      html += card('Waiting for the slowest', '–', 'worst-rank over median-rank p50');
    }
    var crit = st.findings.filter(function (f) { return f.severity === 'critical'; }).length;
    html += card('Findings', fmtInt(st.findings.length),
                 st.findings.length ? crit + ' critical · ' + (st.findings.length - crit) + ' warning' : 'nothing detected',
                 crit ? 'bad' : st.findings.length ? 'warn' : '');
    var counts = {};
    st.ranks.forEach(function (r) { counts[r.state || 'unknown'] = (counts[r.state || 'unknown'] || 0) + 1; });
    var sub = Object.keys(counts).sort().map(function (k) { return counts[k] + ' ' + k.replace(/_/g, ' '); }).join(' · ');
    html += card('Ranks', fmtInt(st.run.world_size), esc(sub),
                 counts.failed || counts.never_connected ? 'bad' : '');
    el.innerHTML = html;
  }

  ss.overview = { render: render };
})(window.ssDash);
