/*
 * core.js - what every part of the stepscope dashboard shares.
 *
 * The dashboard is a set of plain scripts (no framework, no modules: a
 * report file from `stepscope report --html` inlines each script that
 * index.html names, and such a file must work from file:// without
 * fetching anything).  This one runs first and creates window.ssDash, the
 * one object the others hang their parts on: ssDash.runs (the run
 * picker), .live (polling and the event stream), .data (the run as kept
 * in memory), .overview (header, cards, the render of the Run view),
 * .charts (step, phase and memory charts, zoom), .heat, .host, .findings,
 * .goodput, .ranks, .events, .historyView; app.js binds the page and
 * starts it.  The parts call one another through this object only when
 * the page runs, so only core.js has to come first.
 *
 * Here: the constants several parts use, the two pieces of state they all
 * read (ssDash.st, the run shown, see data.newRunState; ssDash.runsList,
 * the runs the picker offers), the formatting helpers, the JSON API's
 * fetch, and the axes every uPlot chart of the page shares.
 *
 * Two modes share every drawing function:
 *   - served (`stepscope run`, `stepscope serve`): reads the JSON API of
 *     docs/api.md; while the chosen run is going it polls once a second,
 *     fetching only what is new (steps after the last one drawn, heat-map
 *     columns after the last one, events after the last id) and, when the
 *     server offers it, takes finalized steps from the run's event stream
 *     as they happen;
 *   - a report file (`stepscope report --html`): the same documents are
 *     embedded in the page (the JSON script element with id "ss-data") and
 *     nothing is fetched.
 *
 * After each render the <body> carries data-state ("loading", "ready",
 * "empty", "error"), data-run-id, data-steps-rendered (steps in the
 * charts), data-heat-cells (cells with a value in the heat map),
 * data-host-steps (steps in the host chart),
 * data-findings (rows in the findings list), data-zoom ("FIRST-LAST" while
 * the charts are zoomed) and data-stream (the live event stream: "open",
 * "ended", "closed"), which tests and scripts can wait for; the History
 * view adds its own (history.js).  The page never writes to the console:
 * problems are shown in the page itself.
 */
(function () {
  'use strict';

  var embedded = document.getElementById('ss-data');

  var ss = window.ssDash = {
    HEAT_STEPS: 300,     /* heat-map (and host) columns in the dashboard */
    PHASE_COLORS: ['#4e79a7', '#f28e2b', '#59a14f', '#b07aa1', '#76b7b2',
                   '#edc948', '#e15759', '#9c755f', '#ff9da7', '#bab0ac'],
    /* the report's embedded documents, or null when served */
    STATIC: embedded ? JSON.parse(embedded.textContent) : null,
    TOKEN: new URLSearchParams(location.search).get('token'),

    st: null,            /* the run shown; see data.newRunState */
    runsList: [],        /* GET /api/runs's runs, oldest first */
    panels: []           /* registerPanel's functions, in order */
  };

  /* A workload panel's script (one script element in index.html, after
   * this file) registers RENDER(st, el): it is called after every drawing
   * of the Run view with the run shown and the #panels element, below the
   * findings and above the charts, where the panel keeps its own
   * <section class="panel"> (created on the first call, hidden when the
   * run has nothing for it). */
  ss.registerPanel = function (render) { ss.panels.push(render); };

  function $(sel) { return document.querySelector(sel); }

  /* ---- formatting ---- */

  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c];
    });
  }
  function isNum(v) { return typeof v === 'number' && isFinite(v); }
  function num(v) { return isNum(v) ? v : null; }
  function fmtMs(v) {
    if (!isNum(v)) return '–';
    var a = Math.abs(v);
    if (a >= 10000) return (v / 1000).toFixed(a >= 100000 ? 0 : 1) + ' s';
    return v.toFixed(a < 1 ? 3 : a < 10 ? 2 : a < 100 ? 1 : 0) + ' ms';
  }
  function fmtMsParts(v) {
    var s = fmtMs(v), i = s.lastIndexOf(' ');
    return i < 0 ? esc(s) : esc(s.slice(0, i)) + '<small>' + esc(s.slice(i + 1)) + '</small>';
  }
  function fmtBytes(v) {
    if (!isNum(v)) return '–';
    var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i === 0 ? v.toFixed(0) : v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)) + ' ' + units[i];
  }
  function fmtInt(v) { return isNum(v) ? v.toLocaleString('en-US') : '–'; }
  function fmtDuration(s) {
    if (!isNum(s)) return '–';
    if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + ' s';
    var m = Math.floor(s / 60);
    if (m < 60) return m + ' min ' + Math.floor(s % 60) + ' s';
    return Math.floor(m / 60) + ' h ' + String(m % 60).padStart(2, '0') + ' min';
  }
  function pad(n, w) { return String(n).padStart(w || 2, '0'); }
  function fmtTime(iso, withDate) {
    if (!iso) return '–';
    var d = new Date(iso);
    if (isNaN(d)) return esc(iso);
    var t = pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
    return withDate ? d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' + t : t;
  }
  function fmtTimeMs(iso) {
    var d = new Date(iso);
    return isNaN(d) ? '–' : fmtTime(iso) + '.' + pad(d.getMilliseconds(), 3);
  }
  function fmtRanks(ranks) {
    if (!ranks || !ranks.length) return 'no rank';
    if (ranks.length > 8) return 'ranks ' + ranks.slice(0, 8).join(', ') + ' … (' + ranks.length + ')';
    return (ranks.length === 1 ? 'rank ' : 'ranks ') + ranks.join(', ');
  }
  function humanKind(k) {
    var s = String(k || '').replace(/_/g, ' ');
    return s.charAt(0).toUpperCase() + s.slice(1);
  }
  function dash(v, f) { return v === null || v === undefined ? '<span class="dash">–</span>' : f(v); }

  function hexRgb(h) {
    var m = /^#?([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})/i.exec(h);
    return m ? [parseInt(m[1], 16), parseInt(m[2], 16), parseInt(m[3], 16)] : [128, 128, 128];
  }

  function alpha(hex, a) {
    var c = hexRgb(hex);
    return 'rgba(' + c[0] + ',' + c[1] + ',' + c[2] + ',' + a + ')';
  }

  function css(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  /* 1, 2 or 5 x 10^k (at least 1): the nearest to RAW, or with UP the
   * smallest not below it. */
  function niceStep(raw, up) {
    var p = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1))));
    var m = raw / p;
    var f = up ? (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10)
               : (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10);
    return Math.max(1, f * p);
  }

  function median(vals) {
    var v = vals.filter(isNum).sort(function (x, y) { return x - y; });
    return v.length ? v[Math.ceil(v.length / 2) - 1] : null;
  }

  function hasAny(a) {
    for (var i = 0; i < a.length; i++) if (a[i] !== null) return true;
    return false;
  }

  function emptyNote(el, text) {
    el.innerHTML = '<div class="empty">' + esc(text) + '</div>';
  }

  /* The run shown is going on and the page follows it (served only). */
  function following() {
    var st = ss.st;
    return !ss.STATIC && st && st.run && (st.run.live || st.run.status === 'running');
  }

  /* ---- the API ---- */

  function apiUrl(path) {
    if (!ss.TOKEN) return 'api/' + path;
    return 'api/' + path + (path.indexOf('?') < 0 ? '?' : '&') + 'token=' + encodeURIComponent(ss.TOKEN);
  }

  /* GET api/PATH: a Promise of its JSON document; a failure is an Error
   * with the server's message and .status (absent when nothing answered). */
  function api(path) {
    return fetch(apiUrl(path), { cache: 'no-store' }).then(function (r) {
      if (!r.ok) {
        return r.json().catch(function () { return {}; }).then(function (body) {
          var e = new Error(body && body.error ? body.error : 'HTTP ' + r.status);
          e.status = r.status;
          throw e;
        });
      }
      return r.json();
    });
  }

  /* Shows MSG in the header's connection note, or hides it (null). */
  function setConn(msg) {
    var el = $('#conn');
    el.hidden = !msg;
    el.textContent = msg || '';
  }

  /* ---- what every chart shares ---- */

  function chartWidth(el) { return Math.max(320, el.clientWidth); }

  /* uPlot axes in the page's theme: x plain, y with UNIT after each value,
   * or as byte sizes with BYTES. */
  var INT_INCRS = [];
  for (var p10 = 1; p10 <= 1e9; p10 *= 10) INT_INCRS.push(p10, 2 * p10, 5 * p10);

  function axes(unit, bytes) {
    var muted = css('--muted'), grid = css('--grid');
    var font = '11px ' + css('--sans');
    return [
      /* x: steps (or run ids), whole numbers: ticks 1, 2 or 5 x 10^k apart */
      { stroke: muted, font: font, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 },
        incrs: INT_INCRS, values: function (u, vals) {
          u.root.dataset.xTicks = vals.join(',');   /* for tests and scripts */
          return vals.map(function (v) { return v == null ? '' : fmtInt(v); });
        } },
      { stroke: muted, font: font, size: 70, grid: { stroke: grid, width: 1 }, ticks: { show: false },
        splits: bytes ? byteSplits : undefined,
        values: function (u, vals) {
          return vals.map(function (v) {
            return v == null ? '' : bytes ? fmtBytes(v).replace(/\.0+ /, ' ') : fmtAxis(v) + unit;
          });
        } }
    ];
  }
  /* Gridlines at round binary sizes (1, 2 or 5 x 10^n KiB, MiB, ...). */
  function byteSplits(u, axisIdx, min, max) {
    var unit = 1;
    while (max / unit >= 1024 && unit < Math.pow(1024, 4)) unit *= 1024;
    var step = niceStep(max / unit / 4) * unit, out = [];
    for (var v = 0; v <= max && out.length < 12; v += step) out.push(v);
    return out;
  }
  function fmtAxis(v) {
    var a = Math.abs(v);
    return a >= 100 ? v.toFixed(0) : a >= 10 ? v.toFixed(a % 1 ? 1 : 0) : +v.toPrecision(3) + '';
  }

  var shared = {
    $: $, esc: esc, isNum: isNum, num: num, fmtMs: fmtMs, fmtMsParts: fmtMsParts,
    fmtBytes: fmtBytes, fmtInt: fmtInt, fmtDuration: fmtDuration, fmtTime: fmtTime,
    fmtTimeMs: fmtTimeMs, fmtRanks: fmtRanks, humanKind: humanKind, dash: dash,
    hexRgb: hexRgb, alpha: alpha, css: css, niceStep: niceStep, median: median,
    hasAny: hasAny, emptyNote: emptyNote, following: following,
    apiUrl: apiUrl, api: api, setConn: setConn, chartWidth: chartWidth, axes: axes
  };
  for (var k in shared) ss[k] = shared[k];
})();
