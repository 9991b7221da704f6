/*
 * heat.js - the Run view's ranks × steps heat map, on a canvas, with the
 * blamed ranks' labels highlighted and a tooltip on hover.  What a cell
 * shows is chosen above the map (#heat-mode):
 *   - a phase's self time relative to that step's median over the ranks
 *     (the default when the headline blames a phase: the slow rank's
 *     phase stands out, and so does the others' wait);
 *   - lateness: how long after the median rank the rank reached the
 *     step's first sync point, relative to the step's median step time
 *     (the default otherwise, when there are sync points);
 *   - step time relative to the step's median (synchronisation evens it
 *     out: every rank waits for the slowest one).
 */
(function (ss) {
  'use strict';

  var $ = ss.$, esc = ss.esc, isNum = ss.isNum, fmtMs = ss.fmtMs, css = ss.css,
      hexRgb = ss.hexRgb, niceStep = ss.niceStep;

  var heatGeom = null;    /* layout of the last heat-map drawing, for hover */
  var mode = null;        /* 'step', 'late' or 'phase:NAME'; null: the default */

  /* The modes the kept data offers, [value, label]. */
  function modes(h) {
    var out = [];
    for (var name in h.phases || {}) out.push(['phase:' + name, 'self time: ' + name]);
    if (h.late && h.late.some(function (row) { return row.some(isNum); })) out.unshift(['late', 'lateness at the sync point']);
    out.unshift(['step', 'step time']);
    return out;
  }

  /* The mode drawn: the chosen one, else the headline's phase, else
   * lateness, else step time. */
  function currentMode(h) {
    var offered = modes(h).map(function (m) { return m[0]; });
    if (mode && offered.indexOf(mode) >= 0) return mode;
    var f = ss.findings.headline();
    if (f && f.phase && offered.indexOf('phase:' + f.phase) >= 0) return 'phase:' + f.phase;
    return offered.indexOf('late') >= 0 ? 'late' : 'step';
  }

  /* What the cells of mode M hold: per rank values (ms) and, per column,
   * the value a cell is compared with (ratio = (ref + v) / ref for
   * lateness, v / ref otherwise). */
  function cellData(h, m) {
    if (m === 'late') return { rows: h.late, ref: columnMedians(h.rows), late: true };
    if (m.indexOf('phase:') === 0) {
      var rows = h.phases[m.slice(6)];
      return { rows: rows, ref: columnMedians(rows), late: false };
    }
    return { rows: h.rows, ref: columnMedians(h.rows), late: false };
  }

  function ratioOf(d, v, ref) {
    if (!isNum(v) || !isNum(ref) || ref <= 0) return null;
    return d.late ? Math.max(1e-6, (ref + v) / ref) : v / ref;
  }

  function fillModes(h, m) {
    var sel = $('#heat-mode'), list = modes(h);
    var key = list.map(function (x) { return x[0]; }).join('\u0000');
    if (sel.dataset.key !== key) {
      sel.innerHTML = list.map(function (x) {
        return '<option value="' + esc(x[0]) + '">' + esc(x[1]) + '</option>';
      }).join('');
      sel.dataset.key = key;
    }
    sel.value = m;
    sel.hidden = list.length < 2;
  }

  /* 256 colors over log2(value / step median) from -0.5 (0.71x) to +1 (2x). */
  var heatLut = null;
  function buildLut() {
    /* neutral from 0.93x to 1.11x the median: noise stays quiet */
    var stops = [[-0.5, hexRgb(css('--heat-fast'))], [-0.1, hexRgb(css('--heat-mid'))],
                 [0.15, hexRgb(css('--heat-mid'))], [0.4, hexRgb(css('--heat-warm'))],
                 [0.75, hexRgb(css('--heat-hot'))], [1, hexRgb(css('--heat-max'))]];
    heatLut = [];
    for (var i = 0; i < 256; i++) {
      var t = -0.5 + 1.5 * i / 255, k = 0;
      while (k < stops.length - 2 && t > stops[k + 1][0]) k++;
      var a = stops[k], b = stops[k + 1], f = Math.min(1, Math.max(0, (t - a[0]) / (b[0] - a[0])));
      heatLut.push('rgb(' + [0, 1, 2].map(function (c) { return Math.round(a[1][c] + (b[1][c] - a[1][c]) * f); }).join(',') + ')');
    }
  }
  function heatColor(ratio) {
    var t = Math.log2(Math.max(ratio, 1e-6));
    var i = Math.round((Math.min(1, Math.max(-0.5, t)) + 0.5) / 1.5 * 255);
    return heatLut[i];
  }

  function columnMedians(rows) {
    var n = rows.length ? rows[0].length : 0;
    var med = new Array(n), vals = [];
    for (var c = 0; c < n; c++) {
      vals.length = 0;
      for (var r = 0; r < rows.length; r++) {
        var v = rows[r][c];
        if (isNum(v)) vals.push(v);
      }
      vals.sort(function (a, b) { return a - b; });
      med[c] = vals.length ? vals[Math.ceil(vals.length / 2) - 1] : null;
    }
    return med;
  }

  function renderHeat() {
    var st = ss.st;
    var canvas = $('#heat-canvas'), wrap = $('#heat');
    var h = st && st.heat;
    if (!heatLut) buildLut();
    drawScale();
    if (!h || !h.steps.length || !h.ranks.length) {
      heatGeom = null;
      canvas.style.display = 'none';
      var note = wrap.querySelector('.empty');
      if (!note) { note = document.createElement('div'); note.className = 'empty'; wrap.appendChild(note); }
      note.textContent = st && st.run ? 'No per-rank step times yet.' : 'Loading…';
      document.body.dataset.heatCells = 0;
      return;
    }
    var old = wrap.querySelector('.empty');
    if (old) old.remove();
    canvas.style.display = 'block';
    var nr = h.ranks.length, nc = h.steps.length;
    var W = Math.max(320, wrap.clientWidth);
    var rowH = nr <= 8 ? 22 : nr <= 32 ? 14 : nr <= 96 ? Math.max(5, Math.floor(420 / nr)) : Math.max(0.5, 480 / nr);
    var gutter = 58, axisH = 24, right = 6;
    var H = Math.ceil(nr * rowH) + axisH;
    var dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(W * dpr);
    canvas.height = Math.round(H * dpr);
    canvas.style.height = H + 'px';
    var ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    var plotW = W - gutter - right, colW = plotW / nc;
    var m = currentMode(h), d = cellData(h, m);
    fillModes(h, m);
    var med = d.ref;
    var gapY = rowH >= 10 ? 2 : rowH >= 5 ? 1 : 0, gapX = colW >= 6 ? 1 : 0;
    var missing = missingPattern(ctx);
    var cells = 0;
    for (var r = 0; r < nr; r++) {
      var row = d.rows[r] || [], y = r * rowH;
      for (var c = 0; c < nc; c++) {
        var x = gutter + c * colW, ratio = ratioOf(d, row[c], med[c]);
        if (ratio !== null) {
          ctx.fillStyle = heatColor(ratio);
          cells++;
        } else {
          ctx.fillStyle = missing;
        }
        /* overlap by a fraction of a pixel so thin columns leave no seams */
        ctx.fillRect(x, y, colW - gapX + (gapX ? 0 : 0.6), rowH - gapY + (gapY ? 0 : 0.6));
      }
    }
    /* rank labels */
    var blamed = ss.findings.blamedRanks();
    var every = Math.max(1, Math.ceil(13 / rowH));
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    for (r = 0; r < nr; r++) {
      var rank = h.ranks[r];
      if (r % every && !blamed[rank]) continue;
      var hot = blamed[rank] !== undefined;
      ctx.font = (hot ? '600 ' : '') + '11px ' + css('--sans');
      ctx.fillStyle = hot ? (blamed[rank] === 'critical' ? css('--critical') : css('--worst')) : css('--muted');
      ctx.fillText('rank ' + rank, gutter - 8, r * rowH + rowH / 2);
    }
    /* step axis */
    ctx.font = '11px ' + css('--sans');
    ctx.fillStyle = css('--muted');
    ctx.textBaseline = 'top';
    /* labels at round step numbers (1, 2 or 5 x 10^k apart), >= 70 px apart */
    var yAxis = nr * rowH + 7, span = Math.max(1, h.steps[nc - 1] - h.steps[0]);
    var every = niceStep(span / Math.max(1, plotW / 70), true), lastX = -Infinity;
    ctx.textAlign = 'center';
    for (c = 0; c < nc; c++) {
      var stepNo = h.steps[c];
      if (c > 0 && Math.floor(stepNo / every) === Math.floor(h.steps[c - 1] / every)) continue;
      if (c === 0 && stepNo % every) continue;
      var lx = gutter + c * colW + colW / 2;
      if (lx - lastX < 60 || lx < gutter + 12 || lx > gutter + plotW - 12) continue;
      ctx.fillText(String(stepNo), lx, yAxis);
      lastX = lx;
    }
    heatGeom = { gutter: gutter, rowH: rowH, colW: colW, nr: nr, nc: nc, med: med, d: d, mode: m };
    var thinned = false;
    for (c = 1; c < nc && !thinned; c++) if (h.steps[c] - h.steps[c - 1] > 1) thinned = true;
    var what = m === 'late' ? 'how long after the median rank each rank reached the step\u2019s first sync point, relative to the median step'
             : m === 'step' ? 'step time relative to the step\u2019s median (synchronisation evens it out: look at lateness or a phase)'
             : m.slice(6) + ' self time relative to the step\u2019s median rank';
    $('#heat-hint').textContent = what + ' · steps ' +
      h.steps[0] + '–' + h.steps[nc - 1] + (thinned ? ' (older steps thinned by retention)' : '');
    document.body.dataset.heatCells = cells;
    document.body.dataset.heatMode = m;
  }

  function missingPattern(ctx) {
    var p = document.createElement('canvas');
    p.width = p.height = 6;
    var c = p.getContext('2d');
    c.strokeStyle = css('--heat-missing');
    c.lineWidth = 1.5;
    c.beginPath();
    c.moveTo(0, 6); c.lineTo(6, 0);
    c.stroke();
    return ctx.createPattern(p, 'repeat');
  }

  function drawScale() {
    var c = $('#heat-scale'), ctx = c.getContext('2d');
    for (var x = 0; x < c.width; x++) {
      ctx.fillStyle = heatLut[Math.round(x / (c.width - 1) * 255)];
      ctx.fillRect(x, 0, 1, c.height);
    }
  }

  function heatHover(ev) {
    var st = ss.st;
    var tip = $('#heat-tip'), g = heatGeom, h = st && st.heat;
    if (!g || !h) { tip.hidden = true; return; }
    var rect = ev.target.getBoundingClientRect();
    var x = ev.clientX - rect.left, y = ev.clientY - rect.top;
    var c = Math.floor((x - g.gutter) / g.colW), r = Math.floor(y / g.rowH);
    if (c < 0 || c >= g.nc || r < 0 || r >= g.nr) { tip.hidden = true; return; }
    var v = (g.d.rows[r] || [])[c], m = g.med[c];
    var html = '<b>rank ' + esc(h.ranks[r]) + '</b> · step ' + esc(h.steps[c]) + '<br>';
    if (isNum(v) && g.d.late) {
      html += (v >= 0 ? fmtMs(v) + ' after' : fmtMs(-v) + ' before') + ' the median rank' +
              (isNum(m) ? ' <span class="muted">(median step ' + fmtMs(m) + ')</span>' : '');
    } else if (isNum(v)) {
      html += fmtMs(v) + (g.mode.indexOf('phase:') === 0 ? ' in ' + esc(g.mode.slice(6)) + ' (self)' : '');
      if (isNum(m) && m > 0) {
        var d = (v / m - 1) * 100;
        html += ' <span class="muted">(' + (d >= 0 ? '+' : '') + d.toFixed(Math.abs(d) < 10 ? 1 : 0) + '% vs median ' + fmtMs(m) + ')</span>';
      }
    } else {
      html += '<span class="muted">no data for this rank</span>';
    }
    tip.innerHTML = html;
    tip.hidden = false;
    var wrapW = ev.target.parentElement.clientWidth;
    var left = x + 14, top = y + 14;
    if (left + tip.offsetWidth > wrapW) left = x - tip.offsetWidth - 10;
    tip.style.left = Math.max(0, left) + 'px';
    tip.style.top = top + 'px';
  }

  /* The theme changed: the colours are read again at the next drawing. */
  function resetColors() { heatLut = null; }

  /* The user chose what the cells show. */
  function setMode(m) {
    mode = m;
    renderHeat();
  }

  ss.heat = { render: renderHeat, hover: heatHover, resetColors: resetColors, setMode: setMode };
})(window.ssDash);
