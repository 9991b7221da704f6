/*
 * rl.js - the dashboard's RL post-training panel (docs/rl.md, docs/dashboard.md).
 *
 * Shown only for a run whose ranks call stepscope.rl_batch (the vectors
 * rl.reward and rl.length).  Over the latest steps it draws:
 *   - the rollout phase per step: the median rank's time and the slowest
 *     rank's, from GET /api/runs/{id}/steps;
 *   - beside it, each rank's longest completion per step, from its
 *     rl.length vectors (GET .../values/rl.length?rank=R), and a table of
 *     the ranks: longest and mean completion of the latest step, and how
 *     often each was the slowest in rollout;
 *   - the reward over steps: the mean over all ranks' completions,
 *     computed here from their rl.reward vectors.
 * KL and entropy are per-rank metrics (stepscope.metric "kl", "entropy"):
 * the API serves no per-step metric series, so the panel says where to
 * find them (`stepscope report`, the store) and the findings list shows
 * kl_spike and entropy_collapse.
 *
 * The panel is its own <section>, placed after the Vectors panel; it
 * chains onto ssValues.update (called by overview.js after each render of
 * the Run view) and needs the served API (a report file has no panel).
 * After each drawing <body> carries data-rl-steps (steps drawn) and
 * data-rl-ranks (ranks with a batch).
 */
(function () {
  'use strict';

  var STEPS = 200;            /* steps drawn at most */
  var MAX_RANKS = 16;         /* ranks whose lengths are fetched */
  var LIVE_EVERY_MS = 5000;
  var COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b',
                '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];

  var S = { runId: null, fetchedAt: 0, busy: false, section: null };

  function section() {
    if (S.section) return S.section;
    var s = document.createElement('section');
    s.className = 'panel';
    s.id = 'panel-rl';
    s.hidden = true;
    s.innerHTML =
      '<div class="panel-head"><h2>RL post-training</h2>' +
      '<span class="hint">rollout time beside completion lengths; reward over steps</span></div>' +
      '<div class="rl-row" style="display:flex;gap:12px;flex-wrap:wrap"><canvas id="rl-rollout" width="460" height="180"></canvas>' +
      '<canvas id="rl-lengths" width="460" height="180"></canvas></div>' +
      '<div class="rl-row" style="display:flex;gap:12px;flex-wrap:wrap"><canvas id="rl-reward" width="460" height="180"></canvas>' +
      '<table id="rl-ranks" class="rl-ranks"></table></div>' +
      '<p class="hint" id="rl-note">KL and entropy (stepscope.metric "kl", "entropy") are per ' +
      'rank in <code>stepscope report</code> and the store; kl_spike and entropy_collapse ' +
      'appear under Findings.</p>';
    var after = document.getElementById('panel-values');
    if (after && after.parentNode) after.parentNode.insertBefore(s, after.nextSibling);
    else document.body.appendChild(s);
    S.section = s;
    return s;
  }

  /* Draws SERIES ([{label, color, points: [[x, y], ...]}]) on canvas ID,
   * with TITLE; axes from the data. */
  function plot(id, title, series) {
    var c = document.getElementById(id);
    var g = c.getContext('2d');
    var w = c.width, h = c.height, L = 44, R = 8, T = 18, B = 18;
    g.clearRect(0, 0, w, h);
    g.font = '11px sans-serif';
    g.fillStyle = '#333';
    g.fillText(title, L, 12);
    var xs = [], ys = [];
    series.forEach(function (s) {
      s.points.forEach(function (p) { if (p[1] !== null && isFinite(p[1])) { xs.push(p[0]); ys.push(p[1]); } });
    });
    if (!xs.length) return;
    var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs);
    var y0 = Math.min(0, Math.min.apply(null, ys)), y1 = Math.max.apply(null, ys);
    if (x1 === x0) x1 = x0 + 1;
    if (y1 === y0) y1 = y0 + 1;
    function X(x) { return L + (x - x0) / (x1 - x0) * (w - L - R); }
    function Y(y) { return h - B - (y - y0) / (y1 - y0) * (h - T - B); }
    g.strokeStyle = '#999';
    g.beginPath(); g.moveTo(L, T); g.lineTo(L, h - B); g.lineTo(w - R, h - B); g.stroke();
    g.fillText(String(+y1.toPrecision(3)), 2, T + 8);
    g.fillText(String(+y0.toPrecision(3)), 2, h - B);
    g.fillText('step ' + x0, L, h - 4);
    g.fillText(String(x1), w - R - 24, h - 4);
    series.forEach(function (s, k) {
      g.strokeStyle = s.color;
      g.beginPath();
      var on = false;
      s.points.forEach(function (p) {
        if (p[1] === null || !isFinite(p[1])) { on = false; return; }
        if (on) g.lineTo(X(p[0]), Y(p[1])); else g.moveTo(X(p[0]), Y(p[1]));
        on = true;
      });
      g.stroke();
      g.fillStyle = s.color;
      g.fillText(s.label, w - R - 90, T + 12 * (k + 1));
    });
  }

  function num(v) { return typeof v === 'number' ? v : null; }

  function draw(steps, byRank, rewards) {
    var roll = steps.filter(function (s) { return s.phases && s.phases.rollout; });
    plot('rl-rollout', 'rollout time, ms', [
      { label: 'median rank', color: COLORS[0],
        points: roll.map(function (s) { return [s.step, s.phases.rollout.median]; }) },
      { label: 'slowest rank', color: COLORS[3],
        points: roll.map(function (s) { return [s.step, s.phases.rollout.max]; }) }]);
    var ranks = Object.keys(byRank).map(Number).sort(function (a, b) { return a - b; });
    plot('rl-lengths', 'longest completion per rank, tokens', ranks.map(function (r, k) {
      return { label: 'rank ' + r, color: COLORS[k % COLORS.length],
               points: byRank[r].map(function (x) { return [x.step, x.max]; }) };
    }));
    plot('rl-reward', 'reward (mean, all ranks)', [
      { label: 'reward', color: COLORS[2],
        points: rewards.map(function (x) { return [x.step, x.mean]; }) }]);
    var slowest = {};
    roll.forEach(function (s) {
      var r = s.phases.rollout.worst_rank;
      slowest[r] = (slowest[r] || 0) + 1;
    });
    var rows = ['<tr><th>rank</th><th>longest (latest)</th><th>mean length</th>' +
                '<th>slowest rollout</th></tr>'];
    ranks.forEach(function (r) {
      var last = byRank[r][byRank[r].length - 1] || {};
      rows.push('<tr><td>' + r + '</td><td>' + (last.max === undefined ? '-' : last.max) +
                '</td><td>' + (last.mean === undefined ? '-' : last.mean.toFixed(1)) +
                '</td><td>' + (slowest[r] || 0) + ' of ' + roll.length + ' steps</td></tr>');
    });
    document.getElementById('rl-ranks').innerHTML = rows.join('');
    document.body.setAttribute('data-rl-steps', String(steps.length));
    document.body.setAttribute('data-rl-ranks', String(ranks.length));
  }

  /* {step, max, mean} per step of one rank's length vectors. */
  function lengthRows(doc) {
    return (doc.steps || []).map(function (s) {
      var v = s.values.map(num).filter(function (x) { return x !== null; });
      var sum = v.reduce(function (a, b) { return a + b; }, 0);
      return { step: s.step, max: v.length ? Math.max.apply(null, v) : null,
               mean: v.length ? sum / v.length : null };
    });
  }

  function refresh(ctx) {
    S.busy = true;
    var base = 'runs/' + ctx.runId;
    ctx.api(base + '/values').then(function (list) {
      var names = {};
      (list.values || []).forEach(function (v) { names[v.name] = v; });
      var lens = names['rl.length'], rew = names['rl.reward'];
      if (!lens || !rew) { section().hidden = true; return null; }
      section().hidden = false;
      var from = Math.max(lens.first_step, lens.last_step - STEPS + 1);
      var ranks = lens.ranks.slice(0, MAX_RANKS);
      return Promise.all([ctx.api(base + '/steps?limit=' + STEPS)]
        .concat(ranks.map(function (r) {
          return ctx.api(base + '/values/rl.length?rank=' + r + '&from=' + from);
        }))
        .concat(ranks.map(function (r) {
          return ctx.api(base + '/values/rl.reward?rank=' + r + '&from=' + from);
        }))).then(function (docs) {
          var byRank = {}, sums = {};
          ranks.forEach(function (r, i) {
            byRank[r] = lengthRows(docs[1 + i]);
            (docs[1 + ranks.length + i].steps || []).forEach(function (s) {
              var t = sums[s.step] || (sums[s.step] = { n: 0, sum: 0 });
              s.values.map(num).forEach(function (x) {
                if (x !== null) { t.n++; t.sum += x; }
              });
            });
          });
          var rewards = Object.keys(sums).map(Number).sort(function (a, b) { return a - b; })
            .map(function (st) { return { step: st, mean: sums[st].n ? sums[st].sum / sums[st].n : null }; });
          draw(docs[0].steps || [], byRank, rewards);
        });
    }).catch(function () { /* the panel stays as it was */ })
      .then(function () { S.busy = false; S.fetchedAt = Date.now(); });
  }

  var ssRl = {
    update: function (ctx) {
      if (!ctx || !ctx.api || !ctx.runId) { if (S.section) S.section.hidden = true; return; }
      var fresh = S.runId === ctx.runId && (!ctx.live || Date.now() - S.fetchedAt < LIVE_EVERY_MS);
      if (S.busy || fresh) return;
      S.runId = ctx.runId;
      refresh(ctx);
    }
  };
  window.ssRl = ssRl;
  /* chained onto the Vectors panel's hook (values.js is loaded before) */
  if (window.ssValues && window.ssValues.update) {
    var inner = window.ssValues.update;
    window.ssValues.update = function (ctx) {
      inner.apply(this, arguments);
      try { ssRl.update(ctx); } catch (e) { /* never breaks the Run view */ }
    };
  }
})();
