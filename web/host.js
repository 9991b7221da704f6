/*
 * host.js - the Run view's Host chart: what the kernel saw of the ranks
 * per step (run-queue delay, time stopped), median rank and worst rank,
 * over the host window (GET /api/runs/{id}/host); hidden when the run has
 * no host evidence.
 */
(function (ss) {
  'use strict';

  var PHASE_COLORS = ss.PHASE_COLORS;
  var $ = ss.$, fmtMs = ss.fmtMs, fmtInt = ss.fmtInt, css = ss.css, hasAny = ss.hasAny,
      chartWidth = ss.chartWidth, axes = ss.axes;

  var chart = null;       /* the uPlot instance */
  var chartN = 0;         /* ranks it was built for */
  var who = null;         /* the worst ranks of the data shown */

  /* The host chart: run-queue delay and stopped time per step, median rank
   * and worst rank; hidden when the run has no host evidence. */
  function renderHost() {
    var st = ss.st;
    var panel = $('#panel-host'), el = $('#chart-host');
    var h = st && st.host, n = h ? h.steps.length : 0;
    var runq = ss.data.hostAcross(h ? h.runq : [], n), stopped = ss.data.hostAcross(h ? h.stopped : [], n);
    var any = hasAny(runq.worst) || hasAny(stopped.worst);
    panel.hidden = !any;
    document.body.dataset.hostSteps = any ? n : 0;
    if (!any) {
      destroy();
      return;
    }
    /* the worst ranks of the data shown (the legend reads them live) */
    who = { runq: runq.who, stopped: stopped.who, ranks: h.ranks };
    function ranked(key) {
      return function (u, v, si, idx) {
        var w = who, r = idx == null ? null : w[key][idx];
        return fmtMs(v) + (r == null || v == null ? '' : ' (rank ' + w.ranks[r] + ')');
      };
    }
    var data = [h.steps, runq.med, runq.worst, stopped.med, stopped.worst];
    if (chart && chartN === h.ranks.length) {
      chart.setData(data);
      return;
    }
    if (chart) chart.destroy();
    el.innerHTML = '';
    var o = {
      width: chartWidth(el), height: 200,
      scales: { x: { time: false }, y: { range: function (u, min, max) { return [0, max > 0 ? max * 1.06 : 1]; } } },
      axes: axes(' ms', false),
      legend: { live: true },
      cursor: { drag: { x: false, y: false }, points: { size: 6 } },
      series: [
        { label: 'step', value: function (u, v) { return v == null ? '–' : fmtInt(v); } },
        { label: 'run queue, median rank', stroke: css('--median'), width: 1.6,
          value: function (u, v) { return fmtMs(v); } },
        { label: 'run queue, worst rank', stroke: css('--worst'), width: 1.6, value: ranked('runq') },
        { label: 'stopped, median rank', stroke: PHASE_COLORS[4], width: 1.4, dash: [5, 3],
          value: function (u, v) { return fmtMs(v); } },
        { label: 'stopped, worst rank', stroke: PHASE_COLORS[6], width: 1.4, dash: [5, 3],
          value: ranked('stopped') }
      ]
    };
    chart = new uPlot(o, data, el);
    chartN = h.ranks.length;
  }

  function destroy() {
    if (chart) { chart.destroy(); chart = null; }
  }

  /* The page's width changed. */
  function resize() {
    if (chart) chart.setSize({ width: chartWidth($('#chart-host')), height: 200 });
  }

  ss.host = { render: renderHost, destroy: destroy, resize: resize };
})(window.ssDash);
