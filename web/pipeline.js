/*
 * pipeline.js - the dashboard's pipeline schedule (docs/dashboard.md,
 * docs/workloads.md#pipelines).
 *
 * For a run whose ranks recorded pipeline microbatches (the vectors
 * pipeline.spans and pipeline.config, src/lib/pipeline.c) it adds a panel
 * after the vectors' panel: the schedule as it ran in a chosen step, one
 * row per stage, time across, each microbatch span a box coloured by its
 * kind (F green, B red, W yellow) and labelled with its index, and per
 * stage its busy time, its measured bubble and the schedule's formula
 * from the step's mean F, B and W (the pipeline detector's arithmetic,
 * base/pipeline_bubble.c).  Each rank's spans are placed from its own step
 * begin (the API has no aligned begins; `stepscope trace` aligns them).
 *
 * It needs no hook: every POLL_MS it looks at the run shown (ssDash.st)
 * and, served, reads GET /api/runs/{id}/values (is there a pipeline?) and
 * .../values/pipeline.spans?rank=R&from=S&to=S for each rank.  A report
 * file draws nothing.  After each drawing the <body> carries
 * data-pipeline-step and data-pipeline-spans (boxes drawn).
 */
(function () {
  'use strict';

  var POLL_MS = 2000;
  var COLOURS = { 1: '#43a047', 2: '#e53935', 3: '#fbc02d' };
  var KINDS = { 1: 'F', 2: 'B', 3: 'W' };
  var SCHEDULES = { 1: 'gpipe', 2: '1f1b', 3: 'interleaved', 4: 'zb1p', 5: 'dualpipe' };
  var S = { runId: null, entry: null, step: null, busy: false, drawnKey: null };

  function el(id) { return document.getElementById(id); }

  /* The schedule's bubble in ms (base/pipeline_bubble.c). */
  function formula(code, p, f, b, w) {
    var bf = b + w, v;
    if (code >= 1 && code <= 3) v = (p - 1) * (f + bf);
    else if (code === 4) v = (p - 1) * (f + bf - 2 * w);
    else if (code === 5) v = (p / 2 - 1) * ((f + bf) + bf - 3 * w);
    else return NaN;
    return v > 0 ? v : 0;
  }

  function panel() {
    var p = el('panel-pipeline');
    if (p) return p;
    p = document.createElement('section');
    p.className = 'panel';
    p.id = 'panel-pipeline';
    p.innerHTML = '<div class="panel-head"><h2>Pipeline schedule</h2>' +
      '<label>step <input id="pipeline-step" type="number" min="0" step="1"></label>' +
      '<span class="hint" id="pipeline-hint"></span></div>' +
      '<canvas id="pipeline-canvas" style="width:100%"></canvas>' +
      '<div class="hint" id="pipeline-stats"></div>';
    var after = el('panel-values');
    if (after && after.parentNode) after.parentNode.insertBefore(p, after.nextSibling);
    else document.body.appendChild(p);
    el('pipeline-step').addEventListener('change', function (ev) {
      S.step = +ev.target.value;
      S.drawnKey = null;
      refresh();
    });
    return p;
  }

  function rowsOf(doc) {
    var s = doc && doc.steps && doc.steps[0];
    return s ? s.values : null;
  }

  function draw(ranks, spans, configs, step) {
    var canvas = el('pipeline-canvas');
    var rows = [], t0 = Infinity, t1 = -Infinity, sum = { 1: 0, 2: 0, 3: 0 },
        cnt = { 1: 0, 2: 0, 3: 0 }, code = 0, stages = 0, boxes = 0;
    ranks.forEach(function (r, i) {
      var v = spans[i], c = configs[i];
      if (!v || !c) return;
      var row = { rank: r, stage: c[0], spans: [], busy: 0 };
      code = c[2]; stages = c[1];
      for (var k = 0; k + 3 < v.length; k += 4) {
        var s = { index: v[k], kind: v[k + 1], b: v[k + 2] / 1e6, e: v[k + 3] / 1e6 };
        if (!(s.kind in KINDS) || !(s.e >= s.b)) continue;
        row.spans.push(s);
        sum[s.kind] += s.e - s.b; cnt[s.kind]++;
        t0 = Math.min(t0, s.b); t1 = Math.max(t1, s.e);
      }
      row.spans.sort(function (a, b) { return a.b - b.b; });
      var end = -Infinity;
      row.spans.forEach(function (s) {   /* the union of the spans */
        var b = Math.max(s.b, end);
        if (s.e > b) row.busy += s.e - b;
        end = Math.max(end, s.e);
      });
      rows.push(row);
    });
    rows.sort(function (a, b) { return a.stage - b.stage || a.rank - b.rank; });
    if (!rows.length || !(t1 > t0)) return 0;
    var mean = function (k) { return cnt[k] ? sum[k] / cnt[k] : 0; };
    var phi = formula(code, stages, mean(1), mean(2), mean(3));
    var dpr = window.devicePixelRatio || 1, W = canvas.clientWidth || 800,
        rowH = 22, left = 150, H = rows.length * rowH + 20;
    canvas.width = W * dpr; canvas.height = H * dpr; canvas.style.height = H + 'px';
    var g = canvas.getContext('2d');
    g.scale(dpr, dpr);
    g.clearRect(0, 0, W, H);
    g.font = '11px sans-serif';
    var x = function (t) { return left + (t - t0) / (t1 - t0) * (W - left - 10); };
    var stats = [];
    rows.forEach(function (row, i) {
      var y = i * rowH + 2;
      g.fillStyle = getComputedStyle(document.body).color || '#000';
      g.fillText('stage ' + row.stage + ' (rank ' + row.rank + ')', 4, y + 14);
      row.spans.forEach(function (s) {
        var a = x(s.b), w = Math.max(1, x(s.e) - a);
        g.fillStyle = COLOURS[s.kind];
        g.fillRect(a, y, w, rowH - 4);
        if (w > 18) {
          g.fillStyle = '#000';
          g.fillText(KINDS[s.kind] + s.index, a + 2, y + 13);
        }
        boxes++;
      });
      var bubble = (t1 - t0) - row.busy;
      stats.push('stage ' + row.stage + ': busy ' + row.busy.toFixed(1) + ' ms, bubble ' +
                 bubble.toFixed(1) + ' ms' + (phi > 0 ? ' (×' + (bubble / phi).toFixed(2) + ')' : ''));
    });
    g.fillStyle = getComputedStyle(document.body).color || '#000';
    g.fillText('0 ms', left, H - 4);
    g.fillText((t1 - t0).toFixed(1) + ' ms', W - 70, H - 4);
    el('pipeline-stats').textContent = (SCHEDULES[code] || '?') + ', ' + stages +
      ' stages; formula ' + (isFinite(phi) ? phi.toFixed(1) + ' ms' : '?') +
      ' (mean F ' + mean(1).toFixed(1) + ', B ' + mean(2).toFixed(1) + ', W ' +
      mean(3).toFixed(1) + ' ms). ' + stats.join('; ');
    el('pipeline-hint').textContent = 'F green, B red, W yellow; each rank from its own step begin';
    return boxes;
  }

  function refresh() {
    var dash = window.ssDash;
    if (S.busy || !dash || dash.STATIC || !dash.st || !dash.st.id) return;
    var id = dash.st.id;
    if (id !== S.runId) { S.runId = id; S.entry = null; S.step = null; S.drawnKey = null; }
    S.busy = true;
    dash.api('runs/' + id + '/values').then(function (list) {
      var e = null;
      (list.values || []).forEach(function (v) { if (v.name === 'pipeline.spans') e = v; });
      var p = el('panel-pipeline');
      if (!e) { if (p) p.hidden = true; return null; }
      panel().hidden = false;
      S.entry = e;
      var step = S.step === null ? e.last_step : Math.max(e.first_step, Math.min(e.last_step, S.step));
      el('pipeline-step').min = e.first_step;
      el('pipeline-step').max = e.last_step;
      el('pipeline-step').value = step;
      var key = id + ':' + step;
      if (key === S.drawnKey) return null;
      var q = '&from=' + step + '&to=' + step;
      var reads = [];
      e.ranks.forEach(function (r) {
        reads.push(dash.api('runs/' + id + '/values/pipeline.spans?rank=' + r + q));
        reads.push(dash.api('runs/' + id + '/values/pipeline.config?rank=' + r + q));
      });
      return Promise.all(reads).then(function (docs) {
        var spans = [], configs = [];
        for (var i = 0; i < docs.length; i += 2) {
          spans.push(rowsOf(docs[i]));
          configs.push(rowsOf(docs[i + 1]));
        }
        var n = draw(e.ranks, spans, configs, step);
        S.drawnKey = key;
        document.body.dataset.pipelineStep = step;
        document.body.dataset.pipelineSpans = n;
      });
    }).catch(function (err) {
      var h = el('pipeline-hint');
      if (h) h.textContent = String(err && err.message || err);
    }).then(function () { S.busy = false; });
  }

  setInterval(refresh, POLL_MS);
})();
