/*
 * history.js - the History view: the comparable runs of one name
 * (GET /api/history), as `stepscope guard` judges them, and the view
 * switcher between it and the Run view (diff.js adds the Diff view's own
 * button and listens for it itself).
 *
 * One small chart per metric over the runs (x: run id), each run's value
 * (its median over the steps after the warm-up, as `stepscope guard`
 * reads it), change points as dashed vertical lines and the latest run's
 * point in the colour of guard's verdict.  The <body> carries
 * data-view ("run" or "history"), data-history-state ("loading",
 * "ready", "empty", "error"), data-history-charts (charts drawn),
 * data-history-run-id and data-history-verdict (the judged run and
 * guard's verdict), data-history-change-points (run ids where some metric
 * changed level) and data-history-regressed (the metrics that regressed,
 * with the run each regression began at, "step_time@7,...").
 */
(function (ss) {
  'use strict';

  var $ = ss.$, esc = ss.esc, isNum = ss.isNum, num = ss.num, css = ss.css, api = ss.api,
      emptyNote = ss.emptyNote, chartWidth = ss.chartWidth, axes = ss.axes;

  var hv = { name: null, gen: 0, doc: null, charts: [], namesKey: null };
  var VERDICT_COLORS = { regressed: '--critical', suspect: '--warning', improved: '--ok', same: '--median' };
  var VERDICT_WORDS = { regression: 'regression', ok: 'no regression', cannot_judge: 'cannot judge' };

  function runNames() {
    var runsList = ss.runsList, seen = {}, names = [];
    for (var i = runsList.length - 1; i >= 0; i--) {
      var n = runsList[i].name;
      if (n && !seen[n]) { seen[n] = 1; names.push(n); }
    }
    return names;
  }

  function renderHistoryNames() {
    var names = runNames();
    var key = names.join('\n') + '\n' + hv.name;
    if (key === hv.namesKey) return;
    hv.namesKey = key;
    if (hv.name && names.indexOf(hv.name) < 0) names.unshift(hv.name);
    $('#history-name').innerHTML = names.map(function (n) {
      return '<option' + (n === hv.name ? ' selected' : '') + '>' + esc(n) + '</option>';
    }).join('') || '<option>no runs</option>';
  }

  /* Shows VIEW; the history is that of NAME, or of the selected run's
   * name. */
  function setView(view, name) {
    var st = ss.st;
    var b = document.body.dataset;
    b.view = view;
    document.querySelectorAll('#views button').forEach(function (btn) {
      btn.setAttribute('aria-pressed', String(btn.dataset.view === view));
    });
    if (view === 'history') {
      var names = runNames();
      showHistory(name || (st && st.run && st.run.name) || hv.name || names[0] || null);
    } else if (st && history.replaceState) {
      history.replaceState(null, '', '#run=' + st.id);
    }
  }

  function destroyHistoryCharts() {
    hv.charts.forEach(function (u) { u.destroy(); });
    hv.charts = [];
  }

  function showHistory(name) {
    var g = ++hv.gen, b = document.body.dataset;
    hv.name = name;
    renderHistoryNames();
    if (!name) {
      destroyHistoryCharts();
      $('#history-charts').innerHTML = '';
      $('#history-verdict').textContent = 'No runs in this store yet.';
      b.historyState = 'empty';
      return;
    }
    if (history.replaceState) history.replaceState(null, '', '#history=' + encodeURIComponent(name));
    b.historyState = 'loading';
    api('history?name=' + encodeURIComponent(name)).then(function (doc) {
      if (g !== hv.gen) return;
      hv.doc = doc;
      renderHistory();
    }, function (e) {
      if (g !== hv.gen) return;
      destroyHistoryCharts();
      $('#history-charts').innerHTML = '';
      $('#history-verdict').textContent = 'Cannot load the history of ' + name + ': ' + e.message;
      b.historyState = 'error';
    });
  }

  function fmtPct(v) { return (v > 0 ? '+' : '') + (100 * v).toFixed(1) + ' %'; }

  /* The uPlot plugin that draws the change points and the judged run. */
  function historyMarks(m, ids) {
    return function (u) {
      var ctx = u.ctx, top = u.bbox.top, h = u.bbox.height, dpr = devicePixelRatio || 1;
      ctx.save();
      ctx.strokeStyle = css('--warning');
      ctx.lineWidth = 1.5 * dpr;
      ctx.setLineDash([5 * dpr, 4 * dpr]);
      m.change_points.forEach(function (id) {
        var x = Math.round(u.valToPos(id, 'x', true));
        ctx.beginPath();
        ctx.moveTo(x, top);
        ctx.lineTo(x, top + h);
        ctx.stroke();
      });
      ctx.setLineDash([]);
      var last = ids.length - 1, v = m.values[last];
      if (isNum(v) && VERDICT_COLORS[m.verdict]) {
        ctx.fillStyle = css(VERDICT_COLORS[m.verdict]);
        ctx.beginPath();
        ctx.arc(u.valToPos(ids[last], 'x', true), u.valToPos(v, 'y', true), 5 * dpr, 0, 2 * Math.PI);
        ctx.fill();
      }
      ctx.restore();
    };
  }

  function historyChart(el, m, ids) {
    var ax = axes('', false); /* the unit is in the chart's title */
    ax[0].values = function (u, vals) { return vals.map(function (v) { return Number.isInteger(v) ? '#' + v : ''; }); };
    ax[1].size = 56;
    var o = {
      width: chartWidth(el), height: 150,
      scales: { x: { time: false, range: function (u, min, max) { return [min - 0.5, max + 0.5]; } },
                y: { range: function (u, min, max) { return [0, max > 0 ? max * 1.15 : 1]; } } },
      axes: ax,
      legend: { show: false },
      cursor: { drag: { x: false, y: false }, points: { size: 6 } },
      series: [{ label: 'run' },
               { label: m.name, stroke: css('--median'), width: 1.5, spanGaps: true,
                 points: { show: true, size: 4 } }],
      hooks: { draw: [historyMarks(m, ids)] }
    };
    return new uPlot(o, [ids, m.values.map(num)], el);
  }

  function renderHistory() {
    var doc = hv.doc, b = document.body.dataset;
    destroyHistoryCharts();
    var ids = doc.runs.map(function (r) { return r.id; });
    var text = 'Run #' + esc(doc.run_id) + ', the latest of ' + esc(doc.name) + ', against ' +
      (doc.baseline.length ? 'run' + (doc.baseline.length > 1 ? 's ' : ' ') + doc.baseline.map(function (id) { return '#' + id; }).join(', ') : 'no run') +
      ': <b class="' + esc(doc.verdict) + '">' + esc(VERDICT_WORDS[doc.verdict] || doc.verdict) + '</b>' +
      (doc.reason ? ' — ' + esc(doc.reason) : '') +
      (doc.left_out ? '<br><small>left out: ' + esc(doc.left_out) + '</small>' : '');
    $('#history-verdict').innerHTML = text;
    var box = $('#history-charts'), marks = {}, regressed = [];
    box.innerHTML = '';
    if (!doc.metrics.length) emptyNote(box, 'No metric recorded in these runs.');
    doc.metrics.forEach(function (m) {
      var card = document.createElement('div');
      card.className = 'hchart';
      card.dataset.metric = m.name;
      card.dataset.verdict = m.verdict;
      card.dataset.changePoints = m.change_points.join(',');
      var judged = m.verdict !== 'no_data' && m.verdict !== 'shown';
      card.innerHTML = '<h3>' + esc(m.name) + (m.unit ? ' <span class="sub">' + esc(m.unit) + '</span>' : '') +
        (judged ? ' <span class="verdict ' + esc(m.verdict) + '">' + esc(m.verdict) + '</span>' : '') +
        (judged && isNum(m.relative) ? ' <span class="sub">' + fmtPct(m.relative) + ' [' + fmtPct(m.relative_low) + ', ' +
          fmtPct(m.relative_high) + ']' + (isNum(m.since_run) ? ' since #' + m.since_run : '') + '</span>' : '') +
        '</h3><div class="hplot"></div>';
      box.appendChild(card);
      hv.charts.push(historyChart(card.querySelector('.hplot'), m, ids));
      m.change_points.forEach(function (id) { marks[id] = 1; });
      if (m.verdict === 'regressed') regressed.push(m.name + '@' + m.since_run);
    });
    b.historyRunId = doc.run_id;
    b.historyVerdict = doc.verdict;
    b.historyChangePoints = Object.keys(marks).sort(function (x, y) { return x - y; }).join(',');
    b.historyRegressed = regressed.join(',');
    b.historyCharts = hv.charts.length;
    b.historyState = 'ready';
  }

  /* The store's runs were fetched again: the name picker follows. */
  function runsChanged() {
    if (hv.name) renderHistoryNames();
  }

  /* The page's width changed. */
  function resize() {
    hv.charts.forEach(function (u) { u.setSize({ width: chartWidth(u.root.parentNode), height: 150 }); });
  }

  /* The theme changed: the charts are drawn again in its colours. */
  function retheme() {
    if (hv.doc) renderHistory();
  }

  ss.historyView = { setView: setView, show: showHistory, runsChanged: runsChanged,
                     resize: resize, retheme: retheme };
})(window.ssDash);
