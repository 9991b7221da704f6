/*
 * charts.js - the Run view's step-indexed charts: step time (median, p90
 * and worst rank, the band between them being the time the others wait
 * for the slowest), phases (self time, median rank and worst-rank dots)
 * and memory (resident and device memory, median and largest rank), with
 * their shared zoom and the "spikes above the chart" clipping.
 */
(function (ss) {
  'use strict';

  var PHASE_COLORS = ss.PHASE_COLORS;
  var $ = ss.$, isNum = ss.isNum, fmtMs = ss.fmtMs, fmtBytes = ss.fmtBytes, fmtInt = ss.fmtInt,
      alpha = ss.alpha, css = ss.css, hasAny = ss.hasAny, emptyNote = ss.emptyNote,
      chartWidth = ss.chartWidth, axes = ss.axes;

  var charts = {};        /* uPlot instances by CHARTS key, and their state */
  var zoomed = false;     /* the user zoomed: live updates keep the range */
  var clipSpikes = true;  /* y axes stop above the typical steps */
  var syncingScale = false;

  /* The step-indexed charts share one x range and one cursor.  A user zoom
   * (drag, or a click on a finding) is kept across live updates until a
   * double-click resets it.  When a chart has more steps than two per
   * pixel it draws one point per pixel column instead: the median of the
   * median-rank values there and the maximum of the worst-rank values (so
   * a spike never disappears), with the step range in the legend; zooming
   * in brings the single steps back. */
  var CHARTS = [
    { key: 'steps', el: '#chart-steps', height: 280 },
    { key: 'phases', el: '#chart-phases', height: 240 },
    { key: 'memory', el: '#chart-memory', height: 200 }
  ];
  var zoomRange = null;   /* [first, last] step while zoomed */

  function eachChart(fn) {
    CHARTS.forEach(function (c) { if (charts[c.key]) fn(charts[c.key], c); });
  }

  /* What a chart draws: per series the values and how a pixel column of
   * them is summarized ('med' or 'max', the latter with the ranks). */
  function chartSources(key) {
    var st = ss.st;
    if (key === 'steps') {
      return [{ a: st.med, agg: 'med' }, { a: st.p90, agg: 'med' },
              { a: st.worst, agg: 'max', r: st.worstRank }];
    }
    if (key === 'memory') {
      var m = [{ a: st.rssMed, agg: 'med' }, { a: st.rssMax, agg: 'max', r: st.rssRank }];
      if (hasAny(st.devMax)) m.push({ a: st.devMed, agg: 'med' }, { a: st.devMax, agg: 'max', r: st.devRank });
      return m;
    }
    var p = [];
    st.phases.forEach(function (ph) {
      p.push({ a: ph.med, agg: 'med' }, { a: ph.worst, agg: 'max', r: ph.worstRank });
    });
    return p;
  }

  function lowerBound(a, v) {
    var lo = 0, hi = a.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (a[mid] < v) lo = mid + 1; else hi = mid; }
    return lo;
  }

  /* Fills charts[KEY + 'View'] with the data for steps LO..HI (all when
   * RANGE is null) at WIDTH pixels and returns the uPlot data array. */
  function chartView(key, range, width) {
    var st = ss.st;
    var src = chartSources(key);
    var i0 = range ? lowerBound(st.x, range[0]) : 0;
    var i1 = range ? lowerBound(st.x, range[1] + 1) : st.x.length;
    var buckets = Math.max(50, Math.round(width));
    var view = { to: null, ranks: [null] };
    var data;
    if (i1 - i0 <= 2 * buckets) {
      data = [st.x].concat(src.map(function (s) { return s.a; }));
      src.forEach(function (s) { view.ranks.push(s.r || null); });
    } else {
      var per = (i1 - i0) / buckets, xs = [], to = [];
      var cols = src.map(function () { return []; }), rk = src.map(function () { return []; });
      var vals = [];
      for (var b = 0; b < buckets; b++) {
        var a = i0 + Math.floor(b * per), e = i0 + Math.floor((b + 1) * per);
        if (e <= a) continue;
        xs.push(st.x[a]);
        to.push(st.x[e - 1]);
        for (var k = 0; k < src.length; k++) {
          var arr = src[k].a;
          if (src[k].agg === 'max') {
            var best = null, at = -1;
            for (var i = a; i < e; i++) if (arr[i] !== null && (best === null || arr[i] > best)) { best = arr[i]; at = i; }
            cols[k].push(best);
            rk[k].push(at >= 0 && src[k].r ? src[k].r[at] : null);
          } else {
            vals.length = 0;
            for (i = a; i < e; i++) if (arr[i] !== null) vals.push(arr[i]);
            vals.sort(function (x, y) { return x - y; });
            cols[k].push(vals.length ? vals[Math.ceil(vals.length / 2) - 1] : null);
            rk[k].push(null);
          }
        }
      }
      data = [xs].concat(cols);
      view.to = to;
      view.ranks = view.ranks.concat(src.map(function (s, k) { return s.r ? rk[k] : null; }));
    }
    charts[key + 'View'] = view;
    return data;
  }

  function plotWidth(u, spec) {
    return u ? u.bbox.width / (window.devicePixelRatio || 1) : chartWidth($(spec.el)) - 90;
  }

  /* Feeds every chart its data for the current zoom; RESET: fit the x
   * range to the data (no zoom). */
  function updateCharts(reset) {
    syncingScale = true;
    eachChart(function (u, spec) {
      var data = chartView(spec.key, zoomed ? zoomRange : null, plotWidth(u, spec));
      setCap(spec.key, data);
      if (zoomed && zoomRange) {
        u.setData(data, false);
        u.setScale('x', { min: zoomRange[0], max: zoomRange[1] });
      } else {
        u.setData(data, reset !== false);
      }
    });
    syncingScale = false;
    renderClip('steps');
    renderClip('phases');
  }

  /* The y cap of the step and phase charts, from the worst-rank values
   * they draw (DATA as given to uPlot). */
  function setCap(key, data) {
    if (key === 'steps') charts.stepsCap = spikeCap([data[3]]);
    else if (key === 'phases') charts.phasesCap = spikeCap(data.filter(function (a, i) { return i > 0 && i % 2 === 0; }));
    var cap = charts[key + 'Cap'];
    if (cap) cap.unit = charts[key + 'View'].to ? 'spike' : 'step';
  }

  /* A zoom by the user on one chart (drag-select, or uPlot's own reset on
   * double-click): every chart follows, at the detail of the new range. */
  function scaleHook(u, key) {
    if (key !== 'x' || syncingScale) return;
    if (!zoomed) return;
    zoomRange = [u.scales.x.min, u.scales.x.max];
    document.body.dataset.zoom = zoomRange.map(Math.round).join('-');
    /* after uPlot has finished applying this change */
    setTimeout(function () { if (zoomed) { updateCharts(false); ss.phaseRanks.render(); } }, 0);
  }

  function commonOpts(spec, unitAxis) {
    var el = $(spec.el);
    return {
      width: chartWidth(el),
      height: spec.height,
      scales: { x: { time: false },
                y: { range: function (u, min, max) {
                  var cap = charts[spec.key + 'Cap'];
                  if (cap && clipSpikes && !zoomed) return [0, cap.top];
                  return [0, max > 0 ? max * 1.06 : 1];
                } } },
      axes: unitAxis,
      legend: { live: true },
      cursor: { sync: { key: 'ss-steps', setSeries: false }, drag: { x: true, y: false },
                points: { size: 6 } },
      select: { show: true },
      hooks: {
        setSelect: [function (u) { if (u.select.width > 0) setZoomed(true); }],
        setScale: [scaleHook],
        ready: [function (u) {
          u.over.addEventListener('dblclick', function () {
            setZoomed(false);
            updateCharts(true);
            ss.phaseRanks.render();
          });
        }]
      }
    };
  }

  function stepLabel(key) {
    return { label: 'step', value: function (u, v, si, idx) {
      if (v == null) return '–';
      var to = charts[key + 'View'] && charts[key + 'View'].to;
      return to && idx != null && to[idx] !== v ? fmtInt(v) + '–' + fmtInt(to[idx]) : fmtInt(v);
    } };
  }
  function withRank(key, fmt) {
    return function (u, v, si, idx) {
      var view = charts[key + 'View'], ranks = view && view.ranks[si];
      var r = idx == null || !ranks ? null : ranks[idx];
      return fmt(v) + (r == null || v == null ? '' : ' (rank ' + r + ')');
    };
  }

  function stepSeries() {
    return [
      stepLabel('steps'),
      { label: 'median rank', stroke: css('--median'), width: 1.6,
        value: function (u, v) { return fmtMs(v); } },
      { label: 'p90 rank', stroke: css('--p90'), width: 1, dash: [4, 3],
        value: function (u, v) { return fmtMs(v); } },
      { label: 'worst rank', stroke: css('--worst'), width: 1.6, value: withRank('steps', fmtMs) }
    ];
  }

  function phaseSeries() {
    var st = ss.st;
    var s = [stepLabel('phases')];
    st.phases.forEach(function (ph, k) {
      var worstOf = withRank('phases', fmtMs);
      s.push({ label: ph.nests ? ph.name + ' (self)' : ph.name, stroke: ph.color, width: 1.6,
               value: function (u, v, si, idx) {
                 if (idx == null) return '–';
                 var w = u.data[si + 1] ? u.data[si + 1][idx] : null;
                 return fmtMs(v) + (isNum(w) ? ' · worst ' + worstOf(u, w, si + 1, idx) : '');
               } });
      s.push({ label: ph.name + ' worst', stroke: ph.color, fill: ph.color, width: 0,
               class: 'ss-nolegend', paths: function () { return null; },
               points: { show: true, size: 3.5, width: 0, fill: alpha(ph.color, 0.6), stroke: alpha(ph.color, 0.6) } });
    });
    return s;
  }

  function memorySeries() {
    var st = ss.st;
    var s = [stepLabel('memory'),
      { label: 'RSS median rank', stroke: css('--median'), width: 1.6, value: function (u, v) { return fmtBytes(v); } },
      { label: 'RSS largest rank', stroke: css('--worst'), width: 1.6, value: withRank('memory', fmtBytes) }];
    if (hasAny(st.devMax)) {
      s.push({ label: 'device median rank', stroke: PHASE_COLORS[4], width: 1.4, dash: [5, 3],
               value: function (u, v) { return fmtBytes(v); } });
      s.push({ label: 'device largest rank', stroke: PHASE_COLORS[6], width: 1.4, dash: [5, 3],
               value: withRank('memory', fmtBytes) });
    }
    return s;
  }

  /* Where a y axis stops so that a few huge steps (start-up, a long stall)
   * do not flatten all the others: 1.5 x the largest per-series p95, used
   * only when some value is more than twice that.  Null otherwise. */
  function spikeCap(arrays) {
    var top = 0, max = 0, n = 0;
    arrays.forEach(function (a) {
      var v = a.filter(isNum).sort(function (x, y) { return x - y; });
      if (v.length < 20) return;
      top = Math.max(top, v[Math.ceil(0.95 * v.length) - 1] * 1.5);
      max = Math.max(max, v[v.length - 1]);
    });
    if (!top || max <= top * 2) return null;
    for (var i = 0; i < arrays[0].length; i++) {
      for (var k = 0; k < arrays.length; k++) if (arrays[k][i] > top) { n++; break; }
    }
    return { top: top, max: max, count: n, unit: 'step' };
  }

  function renderClip(which) {
    var b = $('#clip-' + which), cap = charts[which + 'Cap'];
    if (!b) return;
    b.hidden = !cap || zoomed;
    if (!cap) return;
    b.textContent = clipSpikes
      ? cap.count + ' ' + cap.unit + (cap.count === 1 ? ' goes' : 's go') + ' above the chart (up to ' + fmtMs(cap.max) + ') · show all'
      : 'fit to the typical steps';
  }

  function destroyCharts() {
    eachChart(function (u) { u.destroy(); });
    CHARTS.forEach(function (c) { charts[c.key] = null; charts[c.key + 'Key'] = ''; });
    ss.host.destroy();
  }

  /* Builds chart SPEC when it does not exist or its series changed (a new
   * phase, device memory appearing); updateCharts feeds it data. */
  function ensureChart(spec, seriesKey, build) {
    var u = charts[spec.key], el = $(spec.el);
    if (u && charts[spec.key + 'Key'] === seriesKey) return;
    if (u) u.destroy();
    el.innerHTML = '';
    var o = build(commonOpts(spec, axes(spec.key === 'memory' ? '' : ' ms', spec.key === 'memory')));
    var data = chartView(spec.key, zoomed ? zoomRange : null, plotWidth(null, spec));
    setCap(spec.key, data);
    syncingScale = true;
    charts[spec.key] = new uPlot(o, data, el);
    if (zoomed && zoomRange) charts[spec.key].setScale('x', { min: zoomRange[0], max: zoomRange[1] });
    syncingScale = false;
    charts[spec.key + 'Key'] = seriesKey;
  }

  function dropChart(key) {
    if (charts[key]) { charts[key].destroy(); charts[key] = null; charts[key + 'Key'] = ''; }
  }

  function renderCharts() {
    var st = ss.st;
    if (!st) return;
    var memPanel = $('#panel-memory');
    if (!st.x.length) {
      destroyCharts();
      var msg = st.run ? (ss.following() ? 'Waiting for the first step every rank has finished…' : 'This run has no finalized steps.') : 'Loading…';
      emptyNote($('#chart-steps'), msg);
      emptyNote($('#chart-phases'), msg);
      memPanel.hidden = true;
      document.body.dataset.stepsRendered = 0;
      return;
    }
    /* the band between the median and the worst rank is the time the
     * other ranks spend waiting for the slowest one */
    ensureChart(CHARTS[0], 'steps', function (o) {
      o.series = stepSeries();
      o.bands = [{ series: [3, 1], fill: alpha(css('--worst'), 0.13) }];
      return o;
    });
    if (!st.phases.length) {
      dropChart('phases');
      emptyNote($('#chart-phases'), 'No phases were recorded in this run.');
    } else {
      ensureChart(CHARTS[1], st.phases.map(function (p) { return p.name + (p.nests ? '*' : ''); }).join('\u0000'), function (o) {
        o.series = phaseSeries();
        o.hooks.setSeries = [function (u, i, opts) {
          /* a phase's line and its worst-rank dots are toggled together */
          if (i && i % 2 === 1 && opts && 'show' in opts) u.setSeries(i + 1, { show: opts.show }, false);
        }];
        return o;
      });
    }
    memPanel.hidden = !hasAny(st.rssMax) && !hasAny(st.devMax);
    if (memPanel.hidden) {
      dropChart('memory');
    } else {
      ensureChart(CHARTS[2], hasAny(st.devMax) ? 'rss+device' : 'rss', function (o) {
        o.series = memorySeries();
        o.scales.y.range = function (u, min, max) { return [0, max > 0 ? max * 1.06 : 1]; };
        return o;
      });
    }
    updateCharts();
    document.body.dataset.stepsRendered = st.x.length;
  }

  function setZoomed(z) {
    zoomed = z;
    if (!z) zoomRange = null;
    document.body.dataset.zoom = '';
    renderClip('steps');
    renderClip('phases');
  }

  function zoomTo(first, last) {
    if (!charts.steps || !isNum(first) || !isNum(last)) return;
    var lo = first, hi = last;
    if (hi - lo < 10) { lo -= 5; hi += 5; }
    setZoomed(true);
    zoomRange = [lo, hi];
    document.body.dataset.zoom = lo + '-' + hi;
    updateCharts(false);
    ss.phaseRanks.render();
    $('#chart-steps').scrollIntoView({ behavior: 'smooth', block: 'center' });
  }

  /* A run newly shown: no zoom, spikes clipped. */
  function resetView() {
    setZoomed(false);
    clipSpikes = true;
  }

  /* The page's width changed. */
  function resize() {
    eachChart(function (u, spec) { u.setSize({ width: chartWidth($(spec.el)), height: spec.height }); });
    updateCharts(!zoomed);
  }

  /* The "show all" / "fit to the typical steps" button. */
  function toggleClip() {
    clipSpikes = !clipSpikes;
    updateCharts(true);
    renderClip('steps');
    renderClip('phases');
  }

  /* The steps the charts are zoomed to, [first, last], or null. */
  function range() { return zoomed && zoomRange ? zoomRange.slice() : null; }

  ss.charts = { render: renderCharts, destroy: destroyCharts, reset: resetView, resize: resize,
                zoomTo: zoomTo, toggleClip: toggleClip, range: range };
})(window.ssDash);
