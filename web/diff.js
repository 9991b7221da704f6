/*
 * diff.js - the dashboard's Diff view (docs/dashboard.md): did two runs
 * compute the same bits?  (docs/consistency.md)
 *
 * Two run pickers (A and B), the verdict of GET /api/diff?a=A&b=B (the
 * comparison of `stepscope diff`: losses, numerics scalars and parameter
 * checksums, step by step and rank by rank), and one chart of both runs'
 * mean loss per step and their absolute difference (right axis), with the
 * first divergent step marked by a vertical line.  The view adds its own button to the view switcher, its own
 * section and its own style rules, so that the rest of the page does not
 * need to know it; the view switcher (history.js) sets <body
 * data-view="diff"> when the button is pressed.  The URL #diff=A,B opens it on those runs.  A report
 * file (stepscope report --html) holds one run: the view is not offered.
 *
 * After each drawing the <body> carries data-diff-state ("loading",
 * "ready", "error"), data-diff-status ("identical", "diverged",
 * "incomparable"), data-diff-step (the first divergent step, "" when
 * none), data-diff-ranks (its ranks, "0,2") and data-diff-points (points
 * drawn per curve).
 */
(function () {
  'use strict';

  if (document.getElementById('ss-data')) return; /* a report file */
  if (typeof uPlot === 'undefined') return;

  var TOKEN = new URLSearchParams(location.search).get('token');
  var D = { a: null, b: null, gen: 0, chart: null, runs: [], doc: null };
  var wanted = /^#diff=(\d+),(\d+)$/.exec(location.hash);

  var STYLE =
    'body[data-view="diff"] main > section:not(#diff) { display: none; }\n' +
    'body:not([data-view="diff"]) #diff { display: none; }\n' +
    '#diff .panel-head { flex-wrap: wrap; gap: 8px; }\n' +
    '#diff-verdict { margin: 6px 0 12px; font-size: 14px; color: var(--muted); }\n' +
    '#diff-verdict b.diverged { color: var(--critical); }\n' +
    '#diff-verdict b.identical { color: var(--ok); }\n' +
    '#diff-legend { font-size: 12px; color: var(--muted); }\n';

  function el(id) { return document.getElementById(id); }

  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c];
    });
  }

  function css(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  function api(path) {
    var url = 'api/' + path;
    if (TOKEN) url += (path.indexOf('?') < 0 ? '?' : '&') + 'token=' + encodeURIComponent(TOKEN);
    return fetch(url, { cache: 'no-store' }).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (body) {
        if (!r.ok) throw new Error(body && body.error ? body.error : 'HTTP ' + r.status);
        return body;
      });
    });
  }

  /* The button, the section and the style rules. */
  function build() {
    var style = document.createElement('style');
    style.textContent = STYLE;
    document.head.appendChild(style);
    var btn = document.createElement('button');
    btn.type = 'button';
    btn.dataset.view = 'diff';
    btn.setAttribute('aria-pressed', 'false');
    btn.textContent = 'Diff';
    el('views').appendChild(btn);
    var sec = document.createElement('section');
    sec.id = 'diff';
    sec.className = 'panel';
    sec.innerHTML =
      '<div class="panel-head"><h2>Diff</h2>' +
      '<label for="diff-a">run A</label><select id="diff-a"></select>' +
      '<label for="diff-b">run B</label><select id="diff-b"></select>' +
      '<span class="hint">losses, numerics and parameter checksums compared step by step and rank by rank, ' +
      'as <code>stepscope diff</code> does · the curves: each run\'s mean loss over its ranks · ' +
      'the vertical line: the first step at which they differ</span></div>' +
      '<div id="diff-verdict"></div><div id="diff-chart"></div><div id="diff-legend"></div>';
    document.querySelector('main').appendChild(sec);
    el('diff-a').addEventListener('change', function (ev) { D.a = +ev.target.value; show(); });
    el('diff-b').addEventListener('change', function (ev) { D.b = +ev.target.value; show(); });
    /* after app.js's own handler (bound before this script ran) */
    el('views').addEventListener('click', function (ev) {
      var b = ev.target.closest('button');
      if (b && b.dataset.view === 'diff') open();
    });
    window.addEventListener('resize', function () {
      if (D.chart) D.chart.setSize({ width: width(), height: 260 });
    });
  }

  function width() { return Math.max(320, el('diff-chart').clientWidth || 800); }

  function options(select, chosen) {
    select.innerHTML = D.runs.map(function (r) {
      return '<option value="' + r.id + '"' + (r.id === chosen ? ' selected' : '') + '>#' + r.id +
        (r.name ? ' ' + esc(r.name) : '') + '</option>';
    }).join('') || '<option>no runs</option>';
  }

  /* Shows the view: the two latest runs unless chosen. */
  function open() {
    document.body.dataset.view = 'diff';
    api('runs').then(function (doc) {
      D.runs = (doc.runs || []).slice().sort(function (x, y) { return y.id - x.id; });
      if (D.a === null || D.b === null) {
        D.b = D.runs.length ? D.runs[0].id : null;
        D.a = D.runs.length > 1 ? D.runs[1].id : D.b;
      }
      options(el('diff-a'), D.a);
      options(el('diff-b'), D.b);
      show();
    }, function (e) { fail('Cannot list the runs: ' + e.message); });
  }

  function fail(text) {
    el('diff-verdict').textContent = text;
    document.body.dataset.diffState = 'error';
  }

  function show() {
    var g = ++D.gen, b = document.body.dataset;
    if (D.a === null || D.b === null) { fail('No runs in this store yet.'); return; }
    if (history.replaceState) history.replaceState(null, '', '#diff=' + D.a + ',' + D.b);
    b.diffState = 'loading';
    api('diff?a=' + D.a + '&b=' + D.b).then(function (doc) {
      if (g !== D.gen) return;
      D.doc = doc;
      render(doc);
    }, function (e) {
      if (g === D.gen) fail('Cannot compare runs #' + D.a + ' and #' + D.b + ': ' + e.message);
    });
  }

  function fmt(v) { return typeof v === 'number' ? (Math.abs(v) < 1e-3 && v ? v.toExponential(3) : +v.toPrecision(6)) : '–'; }

  function verdictText(doc) {
    var d = doc.divergence;
    var head = 'Run #' + doc.a.run + ' (attempt ' + doc.a.attempt + ') vs run #' + doc.b.run +
      ' (attempt ' + doc.b.attempt + '): <b class="' + esc(doc.status) + '">' + esc(doc.status) + '</b>';
    if (doc.status === 'incomparable') return head + ' — ' + esc(doc.reason);
    head += ' · ' + doc.common_steps + ' common steps, ' + doc.checksum_steps + ' with checksums';
    if (!d) return head;
    var what = d.what === 'loss' ? 'the loss differs' : d.what === 'numerics'
      ? 'a numerics value differs' : 'the parameters\' checksums differ';
    return head + '<br>first at step <b>' + d.step + '</b> on rank' + (d.ranks_total > 1 ? 's ' : ' ') +
      esc(d.ranks.join(', ')) + ': ' + what + ' first' +
      (d.first_param ? ' · first parameter: <code>' + esc(d.first_param) + '</code> (' + d.params_differ +
        ' of ' + d.params_total + ')' : '') +
      (typeof d.max_loss_diff === 'number' ? ' · the mean loss differs by up to ' + fmt(d.max_loss_diff) +
        ' (step ' + d.max_loss_diff_step + ')' : '');
  }

  /* The uPlot plugin that marks the first divergent step. */
  function mark(step) {
    return function (u) {
      if (step === null) return;
      var ctx = u.ctx, dpr = devicePixelRatio || 1, x = Math.round(u.valToPos(step, 'x', true));
      ctx.save();
      ctx.strokeStyle = css('--critical') || '#d33';
      ctx.lineWidth = 2 * dpr;
      ctx.setLineDash([6 * dpr, 4 * dpr]);
      ctx.beginPath();
      ctx.moveTo(x, u.bbox.top);
      ctx.lineTo(x, u.bbox.top + u.bbox.height);
      ctx.stroke();
      ctx.restore();
    };
  }

  function render(doc) {
    var b = document.body.dataset, d = doc.divergence;
    el('diff-verdict').innerHTML = verdictText(doc);
    if (D.chart) { D.chart.destroy(); D.chart = null; }
    el('diff-chart').innerHTML = '';
    var s = doc.series, points = 0;
    if (s) {
      var xs = [], n = s.loss_a.length;
      for (var i = 0; i < n; i++) xs.push(s.steps[0] + i * s.stride);
      points = n;
      var num = function (v) { return typeof v === 'number' ? v : null; };
      var gap = s.loss_a.map(function (v, k) {
        var w = s.loss_b[k];
        return typeof v === 'number' && typeof w === 'number' ? Math.abs(v - w) : null;
      });
      var o = {
        width: width(), height: 260,
        scales: { x: { time: false }, gap: { auto: true } },
        axes: [{ stroke: css('--muted'), grid: { stroke: css('--grid') },
                 values: function (u, vals) { return vals.map(function (v) { return Number.isInteger(v) ? v : ''; }); } },
               { stroke: css('--muted'), grid: { stroke: css('--grid') }, size: 64 },
               { scale: 'gap', side: 1, stroke: css('--warning'), grid: { show: false }, size: 72,
                 values: function (u, vals) { return vals.map(function (v) { return v ? v.toExponential(1) : '0'; }); } }],
        legend: { show: true },
        cursor: { points: { size: 5 } },
        series: [{ label: 'step' },
                 { label: 'run #' + doc.a.run, stroke: css('--median') || '#4477aa', width: 1.5, spanGaps: true },
                 { label: 'run #' + doc.b.run, stroke: css('--worst') || '#cc6677', width: 1.5, spanGaps: true,
                   dash: [4, 3] },
                 { label: '|A − B| (right axis)', scale: 'gap', stroke: css('--warning') || '#cc9900',
                   width: 1, spanGaps: true }],
        hooks: { draw: [mark(d ? d.step : null)] }
      };
      D.chart = new uPlot(o, [xs, s.loss_a.map(num), s.loss_b.map(num), gap], el('diff-chart'));
      el('diff-legend').textContent = s.stride > 1 ? 'every ' + s.stride + 'th step drawn' : '';
    } else {
      el('diff-legend').textContent = '';
    }
    b.diffStatus = doc.status;
    b.diffStep = d ? d.step : '';
    b.diffRanks = d ? d.ranks.join(',') : '';
    b.diffPoints = points;
    b.diffState = 'ready';
  }

  build();
  if (wanted) {
    D.a = +wanted[1];
    D.b = +wanted[2];
    /* app.js chooses a run and its view first; this view then takes over */
    var tries = 0, wait = setInterval(function () {
      if (document.body.dataset.state !== 'loading' || ++tries > 50) {
        clearInterval(wait);
        document.querySelectorAll('#views button').forEach(function (x) {
          x.setAttribute('aria-pressed', String(x.dataset.view === 'diff'));
        });
        open();
      }
    }, 100);
  }
})();
