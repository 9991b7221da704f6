/*
 * values.js - the dashboard's vector heat maps (docs/dashboard.md).
 *
 * The vectors ranks record (ss_values, stepscope.values) drawn as a heat
 * map: index × step for one rank, or rank × step for one index, with a
 * picker for the name, the view and the rank or index.  The panel is shown
 * only when the run has vectors.  overview.js calls ssValues.update(ctx)
 * after each render of the Run view:
 *   ctx.runId  the run shown;
 *   ctx.api    function(path) -> Promise of a JSON document (served), or
 *              null in a report file;
 *   ctx.data   the report's embedded "values" object (html_report.h), or
 *              null when served;
 *   ctx.live   the run is going on (the map is fetched again now and then).
 * Served, it reads GET /api/runs/{id}/values and .../values/{name}?rank=R
 * or ?index=I over the latest steps that fit the API's default cell cap
 * (docs/api.md); a report file carries, per name, its first rank's map and
 * index 0's map, and the picker offers those.
 *
 * Colours: a sequential scale from the smallest to the largest finite
 * value in the map; NaN, +inf and -inf have colours of their own, as has
 * "no value" (no vector there, or one too short for the index).
 * After each drawing the <body> carries data-values-names (names in the
 * run), data-values-cells (cells with a value, finite or not) and
 * data-values-nonfinite (of them, NaN or infinite).
 */
(function () {
  'use strict';

  var STEPS = 300;          /* steps drawn at most */
  var CELLS = 65536;        /* the API's default cell cap */
  var LIVE_EVERY_MS = 5000; /* refetch while the run goes on */
  var NAN = '#d62fd3', INF = '#8b0000', NINF = '#08306b';

  var S = { runId: null, list: null, name: null, mode: 'rank', pick: null,
            doc: null, fetchedAt: 0, busy: false, pending: false, key: null,
            ctx: null, geom: null };

  function el(id) { return document.getElementById(id); }

  function isVal(v) { return v !== null && v !== undefined; }

  /* A value of the API: a number, or "nan", "inf", "-inf". */
  function kind(v) {
    if (typeof v === 'number') return isFinite(v) ? 'num' : 'nan';
    if (v === 'nan') return 'nan';
    if (v === 'inf') return 'inf';
    if (v === '-inf') return 'ninf';
    return 'none';
  }

  /* Viridis-like ramp, T in [0, 1]. */
  var RAMP = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  function ramp(t) {
    t = Math.max(0, Math.min(1, t)) * (RAMP.length - 1);
    var i = Math.min(RAMP.length - 2, Math.floor(t)), f = t - i;
    var a = RAMP[i], b = RAMP[i + 1];
    return 'rgb(' + Math.round(a[0] + (b[0] - a[0]) * f) + ',' +
      Math.round(a[1] + (b[1] - a[1]) * f) + ',' + Math.round(a[2] + (b[2] - a[2]) * f) + ')';
  }

  function entry(name) {
    var l = S.list ? S.list.values || [] : [];
    for (var i = 0; i < l.length; i++) if (l[i].name === name) return l[i];
    return null;
  }

  /* The first step of the latest STEPS kept steps whose cells fit. */
  function fromStep(e, mode) {
    var width = Math.max(1, mode === 'rank' ? e.max_n || 1 : (e.ranks || []).length);
    var n = Math.min(STEPS, Math.floor(CELLS / width));
    return Math.max(e.first_step, e.last_step - n + 1);
  }

  /* Turns a /values/{name} document into {rows, steps, grid[row][col]}. */
  function toGrid(doc) {
    var steps = doc.steps || [], cols = steps.map(function (s) { return s.step; });
    var rows = [], grid = [];
    if (doc.rank !== undefined) {
      var n = 0;
      steps.forEach(function (s) { n = Math.max(n, (s.values || []).length); });
      for (var i = 0; i < n; i++) {
        rows.push(i);
        grid.push(steps.map(function (s) { return (s.values || [])[i]; }));
      }
    } else {
      var seen = {};
      steps.forEach(function (s) { (s.ranks || []).forEach(function (r) { seen[r] = 1; }); });
      rows = Object.keys(seen).map(Number).sort(function (a, b) { return a - b; });
      var at = {};
      rows.forEach(function (r, k) { at[r] = k; grid.push(new Array(cols.length)); });
      steps.forEach(function (s, c) {
        (s.ranks || []).forEach(function (r, k) { grid[at[r]][c] = s.values[k]; });
      });
    }
    return { rows: rows, steps: cols, grid: grid };
  }

  function renderPicker() {
    var sel = el('values-name'), l = S.list.values || [];
    var names = l.map(function (e) { return e.name; });
    if (sel.dataset.names !== names.join('\n')) {
      sel.innerHTML = '';
      names.forEach(function (n) {
        var o = document.createElement('option');
        o.value = n;
        o.textContent = n;
        sel.appendChild(o);
      });
      sel.dataset.names = names.join('\n');
    }
    if (S.name === null || names.indexOf(S.name) < 0) S.name = names[0];
    sel.value = S.name;
    el('values-mode').value = S.mode;
    var e = entry(S.name), pick = el('values-pick');
    el('values-pick-label').textContent = S.mode === 'rank' ? 'rank' : 'index';
    if (S.pick === null) S.pick = S.mode === 'rank' ? (e.ranks || [0])[0] : 0;
    pick.value = S.pick;
    pick.max = S.mode === 'rank' ? Math.max.apply(null, e.ranks || [0]) : Math.max(0, (e.max_n || 1) - 1);
    pick.disabled = !!(S.ctx && S.ctx.data);
  }

  /* The embedded map of the current choice in a report file, if any. */
  function embedded() {
    var d = S.ctx.data, list = (d && d.series) || [];
    for (var i = 0; i < list.length; i++) {
      var s = list[i];
      if (s.name !== S.name) continue;
      if (S.mode === 'rank' && s.rank !== undefined) { S.pick = s.rank; return s; }
      if (S.mode === 'index' && s.index !== undefined) { S.pick = s.index; return s; }
    }
    return null;
  }

  function curKey() { return S.runId + '|' + S.name + '|' + S.mode + '|' + S.pick; }

  function load(force) {
    var e = entry(S.name);
    if (!e) return;
    var key = curKey();
    if (S.ctx.data) {
      S.doc = embedded();
      S.key = key;
      draw();
      return;
    }
    var fresh = S.key === key && (!S.ctx.live || Date.now() - S.fetchedAt < LIVE_EVERY_MS);
    if (S.busy) { S.pending = S.pending || force || !fresh; return; }
    if (fresh && !force) { draw(); return; }
    S.busy = true;
    var q = 'runs/' + S.runId + '/values/' + encodeURIComponent(S.name) + '?' +
      (S.mode === 'rank' ? 'rank=' : 'index=') + S.pick + '&from=' + fromStep(e, S.mode);
    var run = S.runId;
    S.ctx.api(q).then(function (doc) {
      if (run !== S.runId) return;
      S.doc = doc;
      S.key = key;
      S.fetchedAt = Date.now();
    }, function (err) {
      if (run !== S.runId) return;
      S.doc = null;
      S.key = key;
      S.fetchedAt = Date.now();
      el('values-hint').textContent = 'cannot read it: ' + err.message;
    }).then(function () {
      S.busy = false;
      /* the choice changed while this one was read: read the new one */
      if (S.pending || S.key !== curKey()) { S.pending = false; load(true); } else draw();
    });
  }

  function draw() {
    var canvas = el('values-canvas'), wrap = el('values-heat');
    var b = document.body.dataset;
    var g = S.doc ? toGrid(S.doc) : null;
    var note = wrap.querySelector('.empty');
    if (!g || !g.steps.length || !g.rows.length) {
      S.geom = null;
      canvas.style.display = 'none';
      if (!note) { note = document.createElement('div'); note.className = 'empty'; wrap.appendChild(note); }
      note.textContent = S.doc ? 'No values of ' + S.name + ' for this ' + S.mode + '.' : 'Loading…';
      b.valuesCells = 0;
      b.valuesNonfinite = 0;
      return;
    }
    if (note) note.remove();
    canvas.style.display = 'block';
    var lo = Infinity, hi = -Infinity;
    g.grid.forEach(function (row) {
      row.forEach(function (v) { if (kind(v) === 'num') { lo = Math.min(lo, v); hi = Math.max(hi, v); } });
    });
    var nr = g.rows.length, nc = g.steps.length;
    var W = Math.max(320, wrap.clientWidth);
    var rowH = nr <= 8 ? 22 : nr <= 32 ? 14 : Math.max(1, Math.min(10, 480 / nr));
    var gutter = 72, axisH = 24, right = 6, H = Math.ceil(nr * rowH) + axisH;
    var dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(W * dpr);
    canvas.height = Math.round(H * dpr);
    canvas.style.height = H + 'px';
    var ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    var plotW = W - gutter - right, colW = plotW / nc;
    var missing = getComputedStyle(document.documentElement).getPropertyValue('--heat-missing').trim() || '#e4e4e4';
    var cells = 0, nonfinite = 0;
    for (var r = 0; r < nr; r++) {
      for (var c = 0; c < nc; c++) {
        var v = g.grid[r][c], k = kind(v);
        if (k === 'num') ctx.fillStyle = ramp(hi > lo ? (v - lo) / (hi - lo) : 0.5);
        else if (k === 'nan') ctx.fillStyle = NAN;
        else if (k === 'inf') ctx.fillStyle = INF;
        else if (k === 'ninf') ctx.fillStyle = NINF;
        else ctx.fillStyle = missing;
        if (k !== 'none') { cells++; if (k !== 'num') nonfinite++; }
        ctx.fillRect(gutter + c * colW, r * rowH, colW + 0.6, rowH + 0.6);
      }
    }
    var e = entry(S.name), labels = (e && e.labels) || null;
    ctx.font = '11px sans-serif';
    ctx.fillStyle = '#666';
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    var every = Math.max(1, Math.ceil(13 / rowH));
    for (r = 0; r < nr; r += every) {
      var name = S.mode === 'rank' ? (labels && labels[g.rows[r]] !== undefined ? labels[g.rows[r]] : '#' + g.rows[r])
                                   : 'rank ' + g.rows[r];
      ctx.fillText(String(name).slice(0, 11), gutter - 6, r * rowH + rowH / 2);
    }
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    var lastX = -Infinity;
    for (c = 0; c < nc; c++) {
      var x = gutter + c * colW + colW / 2;
      if (x - lastX < 70) continue;
      ctx.fillText(String(g.steps[c]), x, nr * rowH + 7);
      lastX = x;
    }
    S.geom = { g: g, gutter: gutter, rowH: rowH, colW: colW, labels: labels };
    var sc = el('values-scale'), sx = sc.getContext('2d');
    for (var i = 0; i < sc.width; i++) { sx.fillStyle = ramp(i / (sc.width - 1)); sx.fillRect(i, 0, 1, sc.height); }
    el('values-lo').textContent = isFinite(lo) ? String(+lo.toPrecision(4)) : '';
    el('values-hi').textContent = isFinite(hi) ? String(+hi.toPrecision(4)) : '';
    el('values-hint').textContent = (S.doc.rank !== undefined ? 'index × step of rank ' + S.doc.rank
                                                              : 'rank × step of index ' + S.doc.index) +
      ' · steps ' + g.steps[0] + '–' + g.steps[nc - 1] +
      (S.doc.more ? ' (more: narrower window)' : '') +
      (e && e.truncated ? ' · ' + e.truncated + ' elements truncated' : '') +
      (S.ctx.data ? ' · a report file holds the first rank and index 0' : '');
    b.valuesCells = cells;
    b.valuesNonfinite = nonfinite;
  }

  function tip(ev) {
    var t = el('values-tip'), m = S.geom;
    if (!m) { t.hidden = true; return; }
    var rect = el('values-canvas').getBoundingClientRect();
    var x = ev.clientX - rect.left, y = ev.clientY - rect.top;
    var c = Math.floor((x - m.gutter) / m.colW), r = Math.floor(y / m.rowH);
    if (c < 0 || r < 0 || c >= m.g.steps.length || r >= m.g.rows.length) { t.hidden = true; return; }
    var v = m.g.grid[r][c], row = m.g.rows[r];
    var what = S.mode === 'rank' ? 'index ' + row + (m.labels && m.labels[row] !== undefined ? ' (' + m.labels[row] + ')' : '')
                                 : 'rank ' + row;
    t.textContent = 'step ' + m.g.steps[c] + ' · ' + what + ': ' + (isVal(v) ? String(v) : 'no value');
    t.style.left = Math.min(x + 12, rect.width - 220) + 'px';
    t.style.top = (y + 12) + 'px';
    t.hidden = false;
  }

  function bind() {
    el('values-name').addEventListener('change', function (ev) {
      S.name = ev.target.value; S.pick = null; renderPicker(); load(true);
    });
    el('values-mode').addEventListener('change', function (ev) {
      S.mode = ev.target.value; S.pick = null; renderPicker(); load(true);
    });
    el('values-pick').addEventListener('change', function (ev) {
      var v = parseInt(ev.target.value, 10);
      if (isFinite(v) && v >= 0) { S.pick = v; load(true); }
    });
    el('values-canvas').addEventListener('mousemove', tip);
    el('values-canvas').addEventListener('mouseleave', function () { el('values-tip').hidden = true; });
    window.addEventListener('resize', function () { if (S.doc) draw(); });
  }

  function show(list) {
    S.list = list;
    var n = (list && list.values || []).length;
    document.body.dataset.valuesNames = n;
    el('panel-values').hidden = n === 0;
    if (!n) return;
    renderPicker();
    load(false);
  }

  var listAt = 0, listBusy = false;

  window.ssValues = {
    update: function (ctx) {
      if (!el('panel-values')) return;
      if (ctx.runId !== S.runId) {
        S.runId = ctx.runId; S.list = null; S.name = null; S.pick = null;
        S.doc = null; S.key = null; listAt = 0;
        el('panel-values').hidden = true;
      }
      S.ctx = ctx;
      if (ctx.data) { show(ctx.data.list); return; }
      if (!ctx.api || listBusy) return;
      if (S.list && (!ctx.live || Date.now() - listAt < LIVE_EVERY_MS)) { show(S.list); return; }
      listBusy = true;
      var run = ctx.runId;
      ctx.api('runs/' + run + '/values').then(function (doc) {
        if (run === S.runId) { listAt = Date.now(); show(doc); }
      }, function () {
        /* a server without /values (older) shows no panel */
        if (run === S.runId) { listAt = Date.now(); show({ values: [] }); }
      }).then(function () { listBusy = false; });
    }
  };

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', bind);
  else bind();
})();
