/*
 * app.js - the stepscope dashboard.
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
 * view adds its own (see "history" below).  The page
 * never writes to the console: problems are shown in the page itself.
 */
(function () {
  'use strict';

  var INITIAL_STEPS = 2000;  /* steps fetched when a run is opened */
  var MAX_STEPS = 20000;     /* steps kept while following a live run */
  var HEAT_STEPS = 300;      /* heat-map columns in the dashboard */
  var POLL_MS = 1000;
  var RUNS_POLL_MS = 5000;
  var PHASE_COLORS = ['#4e79a7', '#f28e2b', '#59a14f', '#b07aa1', '#76b7b2',
                      '#edc948', '#e15759', '#9c755f', '#ff9da7', '#bab0ac'];
  var ROUTINE_EVENTS = { run_started: 1, rank_connected: 1, rank_exited: 1 };
  var BAD_EVENTS = { rank_failed: 1, rank_missing: 1, rank_never_connected: 1,
                     rejected_connection: 1, refused_records: 1 };

  var embedded = document.getElementById('ss-data');
  var STATIC = embedded ? JSON.parse(embedded.textContent) : null;
  var TOKEN = new URLSearchParams(location.search).get('token');

  var st = null;          /* the run shown; see newRunState */
  var gen = 0;            /* bumped when another run is chosen */
  var pollTimer = null;
  var stream = null;      /* EventSource of the live run, if any */
  var runsList = [];
  var charts = {};         /* uPlot instances by CHARTS key, and their state */
  var zoomed = false;     /* the user zoomed: live updates keep the range */
  var clipSpikes = true;  /* y axes stop above the typical steps */
  var syncingScale = false;
  var renderQueued = false;
  var heatGeom = null;    /* layout of the last heat-map drawing, for hover */

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

  function alpha(hex, a) {
    var c = hexRgb(hex);
    return 'rgba(' + c[0] + ',' + c[1] + ',' + c[2] + ',' + a + ')';
  }

  function css(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  /* ---- the run's data, as kept in memory ---- */

  function newRunState(id) {
    return {
      id: id,
      run: null, summary: null,
      x: [], med: [], p90: [], worst: [], worstRank: [],
      rssMed: [], rssMax: [], rssRank: [], devMed: [], devMax: [], devRank: [],
      phases: [], phaseByName: {},   /* {name, color, med, worst, worstRank, nests} */
      lastStep: null, pending: {}, pendingN: 0,
      failures: 0, gone: false, lost: false, ended: false, inflight: false, again: false,
      heat: null,                     /* {ranks, steps, rows: [per rank]} */
      host: null,                     /* {ranks, steps, runq, stopped: [per rank]} */
      goodput: null, goodputAt: 0,
      ranks: [], findings: [], events: [], lastEventId: 0,
      streamFailed: false
    };
  }

  function following() {
    return !STATIC && st && st.run && (st.run.live || st.run.status === 'running');
  }

  function addStep(s) {
    if (st.lastStep !== null && s.step <= st.lastStep) return;
    var i = st.x.length, sm = s.step_ms || {};
    st.x.push(s.step);
    st.med.push(num(sm.median));
    st.p90.push(num(sm.p90));
    st.worst.push(num(sm.max));
    st.worstRank.push(num(sm.worst_rank));
    var rss = s.rss_bytes || {}, dev = s.device_bytes || {};
    st.rssMed.push(num(rss.median));
    st.rssMax.push(num(rss.max));
    st.rssRank.push(num(rss.worst_rank));
    st.devMed.push(num(dev.median));
    st.devMax.push(num(dev.max));
    st.devRank.push(num(dev.worst_rank));
    var phases = s.phases || {};
    for (var name in phases) {
      var ph = st.phaseByName[name];
      if (!ph) {
        ph = { name: name, color: PHASE_COLORS[st.phases.length % PHASE_COLORS.length],
               med: new Array(i).fill(null), worst: new Array(i).fill(null),
               worstRank: new Array(i).fill(null) };
        st.phaseByName[name] = ph;
        st.phases.push(ph);
      }
      /* Phases nest (allreduce inside backward): the chart shows each
       * phase's self time where recorded, so that a slow rank's backward
       * does not hide behind the shorter wait nested in it. */
      var p = phases[name] || {};
      var own = p.self || p;
      if (p.self && (p.self.median !== p.median || p.self.max !== p.max)) ph.nests = true;
      ph.med.push(num(own.median));
      ph.worst.push(num(own.max));
      ph.worstRank.push(num(own.worst_rank));
    }
    for (var j = 0; j < st.phases.length; j++) {
      var q = st.phases[j];
      if (q.med.length <= i) { q.med.push(null); q.worst.push(null); q.worstRank.push(null); }
    }
    st.lastStep = s.step;
  }

  /* Appends LIST (ascending steps; those already drawn are skipped), then
   * the steps the stream delivered beyond a gap that is now filled. */
  function addSteps(list) {
    for (var k = 0; k < list.length; k++) addStep(list[k]);
    if (st.pendingN) {
      for (var key in st.pending) {
        if (+key <= st.lastStep) { delete st.pending[key]; st.pendingN--; }
      }
      while (st.pending[st.lastStep + 1]) {
        var next = st.pending[st.lastStep + 1];
        delete st.pending[st.lastStep + 1];
        st.pendingN--;
        addStep(next);
      }
    }
    /* while following a live run, drop the oldest steps in chunks */
    if (!STATIC && st.x.length > MAX_STEPS + 1000) {
      var cut = st.x.length - MAX_STEPS;
      [st.x, st.med, st.p90, st.worst, st.worstRank, st.rssMed, st.rssMax, st.rssRank,
       st.devMed, st.devMax, st.devRank].forEach(function (a) { a.splice(0, cut); });
      st.phases.forEach(function (ph) {
        ph.med.splice(0, cut);
        ph.worst.splice(0, cut);
        ph.worstRank.splice(0, cut);
      });
    }
  }

  /* HEAT: a heatmap document; APPEND: its columns follow the ones kept. */
  function addHeat(doc, append) {
    if (!doc || !doc.ranks || !doc.steps) return;
    var h = st.heat;
    if (!append || !h || h.ranks.length !== doc.ranks.length) {
      st.heat = { ranks: doc.ranks.slice(), steps: doc.steps.slice(),
                  rows: doc.step_ms.map(function (r) { return r.slice(); }) };
    } else {
      var last = h.steps.length ? h.steps[h.steps.length - 1] : -Infinity;
      for (var c = 0; c < doc.steps.length; c++) {
        if (doc.steps[c] <= last) continue;
        h.steps.push(doc.steps[c]);
        for (var r = 0; r < h.rows.length; r++) h.rows[r].push(doc.step_ms[r] ? doc.step_ms[r][c] : null);
      }
    }
    h = st.heat;
    if (!STATIC && h.steps.length > HEAT_STEPS) {
      var cut = h.steps.length - HEAT_STEPS;
      h.steps.splice(0, cut);
      h.rows.forEach(function (row) { row.splice(0, cut); });
    }
  }

  /* DOC: a host document (/api/runs/{id}/host); APPEND: its steps follow
   * the ones kept.  Keeps run-queue delay and stopped time per rank. */
  function addHost(doc, append) {
    if (!doc || !doc.ranks || !doc.steps) return;
    var h = st.host;
    function rows(a) { return (a || []).map(function (r) { return r.slice(); }); }
    if (!append || !h || h.ranks.length !== doc.ranks.length) {
      st.host = { ranks: doc.ranks.slice(), steps: doc.steps.slice(),
                  runq: rows(doc.runq_ms), stopped: rows(doc.stopped_ms) };
    } else {
      var last = h.steps.length ? h.steps[h.steps.length - 1] : -Infinity;
      for (var c = 0; c < doc.steps.length; c++) {
        if (doc.steps[c] <= last) continue;
        h.steps.push(doc.steps[c]);
        for (var r = 0; r < h.ranks.length; r++) {
          h.runq[r].push(doc.runq_ms[r] ? doc.runq_ms[r][c] : null);
          h.stopped[r].push(doc.stopped_ms[r] ? doc.stopped_ms[r][c] : null);
        }
      }
    }
    h = st.host;
    if (!STATIC && h.steps.length > HEAT_STEPS) {
      var cut = h.steps.length - HEAT_STEPS;
      h.steps.splice(0, cut);
      h.runq.forEach(function (row) { row.splice(0, cut); });
      h.stopped.forEach(function (row) { row.splice(0, cut); });
    }
  }

  function median(vals) {
    var v = vals.filter(isNum).sort(function (x, y) { return x - y; });
    return v.length ? v[Math.ceil(v.length / 2) - 1] : null;
  }

  /* Per step of the host window: the median rank's and the worst rank's
   * value of ROWS (one array per rank), and which rank was worst. */
  function hostAcross(rows, n) {
    var med = [], worst = [], who = [];
    for (var i = 0; i < n; i++) {
      var col = [], best = null, at = null;
      for (var r = 0; r < rows.length; r++) {
        var v = rows[r][i];
        if (!isNum(v)) continue;
        col.push(v);
        if (best === null || v > best) { best = v; at = r; }
      }
      med.push(median(col));
      worst.push(best);
      who.push(at);
    }
    return { med: med, worst: worst, who: who };
  }

  function addEvents(list) {
    for (var i = 0; i < list.length; i++) {
      var e = list[i];
      if (isNum(e.id) && e.id <= st.lastEventId) continue;
      st.events.push(e);
      if (isNum(e.id)) st.lastEventId = e.id;
    }
    if (st.events.length > 2000) st.events.splice(0, st.events.length - 2000);
  }

  /* ---- the API ---- */

  function apiUrl(path) {
    if (!TOKEN) return 'api/' + path;
    return 'api/' + path + (path.indexOf('?') < 0 ? '?' : '&') + 'token=' + encodeURIComponent(TOKEN);
  }

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

  function setConn(msg) {
    var el = $('#conn');
    el.hidden = !msg;
    el.textContent = msg || '';
  }

  function loadRuns() {
    return api('runs').then(function (doc) {
      runsList = doc.runs || [];
      renderPicker();
      if (hv.name) renderHistoryNames();
      return runsList;
    });
  }

  function chooseInitialRun(runs) {
    var m = /(?:^|[#&])run=(\d+)/.exec(location.hash);
    if (m && runs.some(function (r) { return r.id === +m[1]; })) return +m[1];
    for (var i = runs.length - 1; i >= 0; i--) if (runs[i].live) return runs[i].id;
    return runs.length ? runs[runs.length - 1].id : null;
  }

  function selectRun(id) {
    gen++;
    clearTimeout(pollTimer);
    closeStream();
    st = newRunState(id);
    setZoomed(false);
    clipSpikes = true;
    destroyCharts();
    if (history.replaceState) history.replaceState(null, '', '#run=' + id);
    document.body.dataset.state = 'loading';
    document.body.dataset.runId = id;
    $('#run-select').value = String(id);
    render();
    refresh(gen);
  }

  /* One round of polling; rounds never overlap (a call during one makes
   * the next start as soon as it ends). */
  function refresh(g) {
    if (st.inflight) { st.again = true; return; }
    st.inflight = true;
    st.again = false;
    clearTimeout(pollTimer);
    var id = st.id;
    var stepsQ = st.lastStep === null ? 'steps?limit=' + INITIAL_STEPS
                                      : 'steps?from=' + (st.lastStep + 1) + '&limit=10000';
    var heatLast = st.heat && st.heat.steps.length ? st.heat.steps[st.heat.steps.length - 1] : null;
    var heatQ = heatLast === null ? 'heatmap?limit=' + HEAT_STEPS
                                  : 'heatmap?from=' + (heatLast + 1) + '&limit=' + HEAT_STEPS;
    var hostLast = st.host && st.host.steps.length ? st.host.steps[st.host.steps.length - 1] : null;
    var hostQ = hostLast === null ? 'host?limit=' + HEAT_STEPS
                                  : 'host?from=' + (hostLast + 1) + '&limit=' + HEAT_STEPS;
    var base = 'runs/' + id + '/';
    /* the run first: while the server is away that is the one request
     * that fails, not six; then whatever arrives is used, so the last
     * state of a run whose controller is shutting down still shows */
    api('runs/' + id).then(function (runDoc) {
      if (g !== gen) return;
      st.run = runDoc.run;
      st.summary = runDoc.summary;
      return Promise.allSettled([
        api(base + stepsQ), api(base + heatQ), api(base + 'ranks'),
        api(base + 'findings'), api(base + 'events?after=' + st.lastEventId),
        api(base + hostQ),
        /* goodput reads every step: now and then while the run goes on */
        following() && Date.now() - st.goodputAt < GOODPUT_EVERY_MS
          ? Promise.resolve(null) : api(base + 'goodput')
      ]).then(function (res) {
        if (g !== gen) return;
        var got = res.map(function (r) { return r.status === 'fulfilled' ? r.value : null; });
        if (got[0]) addSteps(got[0].steps || []);
        if (got[1]) addHeat(got[1], heatLast !== null);
        if (got[2]) st.ranks = got[2].ranks || [];
        if (got[3]) st.findings = got[3].findings || [];
        if (got[4]) addEvents(got[4].events || []);
        if (got[5]) addHost(got[5], hostLast !== null);
        if (got[6]) { st.goodput = got[6].goodput; st.goodputAt = Date.now(); }
        /* an older server without /host is not an error */
        for (var i = 0; i < 5; i++) if (res[i].status === 'rejected') throw res[i].reason;
      });
    }).then(function () {
      if (g !== gen) return;
      st.failures = 0;
      st.lost = false;
      setConn(null);
      updatePickerEntry();
      render();
      if (following()) openStream(g);
      else closeStream();
    }, function (e) {
      if (g !== gen) return;
      st.failures++;
      if (e.status === 404 && !st.run) {
        st.gone = true;
        document.body.dataset.state = 'error';
        $('#run-title').textContent = 'Run ' + id + ' is not in this store';
        return;
      }
      if (st.run && !following()) {
        /* the run ended while its controller was going away */
        closeStream();
        setConn(null);
        updatePickerEntry();
        render();
        return;
      }
      if (!e.status && st.run) {
        /* the controller stops serving when its run ends */
        st.lost = true;
        render();
        if (st.ended) {
          st.gone = true;   /* nothing will answer here any more */
          setConn('The run ended and its controller stopped serving. Its record is in the store: ' +
                  'stepscope serve shows it, stepscope report --html writes it to a file.');
          return;
        }
      }
      setConn(e.status ? 'server error: ' + e.message + ' · retrying'
                       : 'The server stopped answering; if the run ended, its record is in the store ' +
                         '(stepscope serve, stepscope report --html). Retrying…');
    }).then(function () {
      if (g !== gen) return;
      st.inflight = false;
      if (st.gone) return;
      /* 1 s while all is well; backing off to 16 s while the server fails */
      var wait = st.again ? 0 : POLL_MS * Math.pow(2, Math.min(st.failures, 4));
      if (!st.run || following()) pollTimer = setTimeout(function () { refresh(g); }, wait);
    });
  }

  /* The picker's line for the run shown follows its latest state. */
  function updatePickerEntry() {
    for (var i = 0; i < runsList.length; i++) {
      var r = runsList[i];
      if (r.id !== st.id) continue;
      r.status = st.run.status;
      r.live = st.run.live;
      if (st.summary && isNum(st.summary.steps)) r.steps = st.summary.steps;
      renderPicker();
    }
  }

  /* The live stream: finalized steps arrive as they happen.  A step that
   * follows the last one drawn is drawn at once; one after a gap (the
   * steps finalized before the stream opened) waits until polling has
   * filled the gap, so the series never have holes.  Any error ends the
   * stream for this run and polling carries on alone. */
  function openStream(g) {
    if (stream || st.streamFailed || typeof EventSource === 'undefined') return;
    var es = new EventSource(apiUrl('runs/' + st.id + '/stream'));
    stream = es;
    es.onopen = function () { document.body.dataset.stream = 'open'; };
    es.addEventListener('step', function (ev) {
      if (g !== gen) return;
      var s;
      try { s = JSON.parse(ev.data); } catch (err) { return; }
      if (!s || !isNum(s.step) || (st.lastStep !== null && s.step <= st.lastStep)) return;
      if (st.lastStep === null || s.step === st.lastStep + 1) {
        addSteps([s]);
        queueChartRender();
      } else if (st.pendingN < 10000 && !st.pending[s.step]) {
        st.pending[s.step] = s;   /* after a gap that polling fills */
        st.pendingN++;
      }
    });
    es.addEventListener('finding', function (ev) {
      if (g !== gen) return;
      var f;
      try { f = JSON.parse(ev.data); } catch (err) { return; }
      if (!f || !isNum(f.id)) return;
      var i = st.findings.findIndex(function (x) { return x.id === f.id; });
      if (i >= 0) st.findings[i] = f; else st.findings.push(f);
      renderFindings();
    });
    /* the run ended, or this reader fell behind: polling catches up */
    es.addEventListener('end', function () {
      es.close();
      if (stream === es) stream = null;
      document.body.dataset.stream = 'ended';
      if (g === gen) { st.streamFailed = true; st.ended = true; refresh(g); }
    });
    es.addEventListener('lagged', function () { if (g === gen) refresh(g); });
    es.onerror = function () {
      es.close();
      document.body.dataset.stream = 'closed';
      if (stream === es) stream = null;
      if (g === gen) st.streamFailed = true;
    };
  }

  function closeStream() {
    if (stream) stream.close();
    stream = null;
  }

  function queueChartRender() {
    if (renderQueued) return;
    renderQueued = true;
    requestAnimationFrame(function () {
      renderQueued = false;
      renderCharts();
    });
  }

  /* ---- rendering ---- */

  function render() {
    renderHeader();
    renderCards();
    renderCharts();
    renderHeat();
    renderHost();
    renderGoodput();
    renderFindings();
    renderRanks();
    renderEvents();
    /* the vectors' heat maps: values.js */
    if (window.ssValues && st.run) {
      window.ssValues.update({ runId: st.id, api: STATIC ? null : api, live: following(),
                               data: STATIC ? STATIC.values || { list: { values: [] } } : null });
    }
    var b = document.body.dataset;
    if (st.run) b.state = 'ready';
  }

  function renderPicker() {
    var sel = $('#run-select');
    if (STATIC) return;
    var keep = st ? st.id : null;
    var html = '';
    for (var i = runsList.length - 1; i >= 0; i--) {
      var r = runsList[i];
      html += '<option value="' + esc(r.id) + '"' + (r.id === keep ? ' selected' : '') + '>#' + esc(r.id) +
              ' ' + esc(r.name) + ' — ' + (r.live ? 'live' : esc(r.status)) + ' · ' +
              fmtInt(r.steps) + ' steps</option>';
    }
    sel.innerHTML = html || '<option>no runs</option>';
    sel.disabled = !runsList.length;
  }

  function renderHeader() {
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

  /* ---- charts ---- */

  function chartWidth(el) { return Math.max(320, el.clientWidth); }

  function axes(unit, bytes) {
    var muted = css('--muted'), grid = css('--grid');
    var font = '11px ' + css('--sans');
    return [
      { stroke: muted, font: font, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } },
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
    setTimeout(function () { if (zoomed) updateCharts(false); }, 0);
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

  function hasAny(a) {
    for (var i = 0; i < a.length; i++) if (a[i] !== null) return true;
    return false;
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
    if (charts.host) { charts.host.destroy(); charts.host = null; }
  }

  function emptyNote(el, text) {
    el.innerHTML = '<div class="empty">' + esc(text) + '</div>';
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
    if (!st) return;
    var memPanel = $('#panel-memory');
    if (!st.x.length) {
      destroyCharts();
      var msg = st.run ? (following() ? 'Waiting for the first step every rank has finished…' : 'This run has no finalized steps.') : 'Loading…';
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
    $('#chart-steps').scrollIntoView({ behavior: 'smooth', block: 'center' });
  }

  /* ---- heat map ---- */

  function hexRgb(h) {
    var m = /^#?([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})/i.exec(h);
    return m ? [parseInt(m[1], 16), parseInt(m[2], 16), parseInt(m[3], 16)] : [128, 128, 128];
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

  function columnMedians(h) {
    var med = new Array(h.steps.length), vals = [];
    for (var c = 0; c < h.steps.length; c++) {
      vals.length = 0;
      for (var r = 0; r < h.rows.length; r++) {
        var v = h.rows[r][c];
        if (isNum(v)) vals.push(v);
      }
      vals.sort(function (a, b) { return a - b; });
      med[c] = vals.length ? vals[Math.ceil(vals.length / 2) - 1] : null;
    }
    return med;
  }

  function blamedRanks() {
    var set = {};
    st.findings.forEach(function (f) { (f.ranks || []).forEach(function (r) { set[r] = f.severity; }); });
    return set;
  }

  function renderHeat() {
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
    var med = columnMedians(h);
    var gapY = rowH >= 10 ? 2 : rowH >= 5 ? 1 : 0, gapX = colW >= 6 ? 1 : 0;
    var missing = missingPattern(ctx);
    var cells = 0;
    for (var r = 0; r < nr; r++) {
      var row = h.rows[r] || [], y = r * rowH;
      for (var c = 0; c < nc; c++) {
        var v = row[c], x = gutter + c * colW;
        if (isNum(v) && isNum(med[c]) && med[c] > 0) {
          ctx.fillStyle = heatColor(v / med[c]);
          cells++;
        } else {
          ctx.fillStyle = missing;
        }
        /* overlap by a fraction of a pixel so thin columns leave no seams */
        ctx.fillRect(x, y, colW - gapX + (gapX ? 0 : 0.6), rowH - gapY + (gapY ? 0 : 0.6));
      }
    }
    /* rank labels */
    var blamed = blamedRanks();
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
    heatGeom = { gutter: gutter, rowH: rowH, colW: colW, nr: nr, nc: nc, med: med };
    var thinned = false;
    for (c = 1; c < nc && !thinned; c++) if (h.steps[c] - h.steps[c - 1] > 1) thinned = true;
    $('#heat-hint').textContent = 'step time relative to the step\u2019s median · steps ' +
      h.steps[0] + '–' + h.steps[nc - 1] + (thinned ? ' (older steps thinned by retention)' : '');
    document.body.dataset.heatCells = cells;
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
    var tip = $('#heat-tip'), g = heatGeom, h = st && st.heat;
    if (!g || !h) { tip.hidden = true; return; }
    var rect = ev.target.getBoundingClientRect();
    var x = ev.clientX - rect.left, y = ev.clientY - rect.top;
    var c = Math.floor((x - g.gutter) / g.colW), r = Math.floor(y / g.rowH);
    if (c < 0 || c >= g.nc || r < 0 || r >= g.nr) { tip.hidden = true; return; }
    var v = h.rows[r][c], m = g.med[c];
    var html = '<b>rank ' + esc(h.ranks[r]) + '</b> · step ' + esc(h.steps[c]) + '<br>';
    if (isNum(v)) {
      html += fmtMs(v);
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

  /* ---- lists ---- */

  var GOODPUT_EVERY_MS = 15000;
  var GOODPUT_LABELS = {
    productive: 'productive', startup: 'start-up', checkpoint: 'checkpoint',
    lost_work: 'lost work', restart: 'restart', hang: 'hang',
    data_stall: 'data stall', straggler: 'stragglers', other: 'other'
  };

  /* One stacked bar per attempt: its wall time by category. */
  function renderGoodput() {
    var g = st && st.goodput, panel = $('#panel-goodput');
    panel.hidden = !g || !g.attempts || !g.attempts.length;
    if (panel.hidden) return;
    var cats = Object.keys(GOODPUT_LABELS);
    function bar(ms, wall) {
      return '<div class="gp-bar">' + cats.map(function (c) {
        var v = ms[c] || 0, pct = wall > 0 ? 100 * v / wall : 0;
        return pct <= 0 ? '' : '<span class="gp-' + c + '" style="width:' + pct.toFixed(3) +
          '%" title="' + esc(GOODPUT_LABELS[c] + ': ' + fmtDuration(v / 1000) + ' (' + pct.toFixed(1) + ' %)') + '"></span>';
      }).join('') + '</div>';
    }
    var html = '<div class="gp-total">goodput <b>' + (100 * g.goodput).toFixed(1) + ' %</b> of ' +
      fmtDuration(g.wall_ms / 1000) + (g.running ? ' so far' : '') + '</div>';
    html += g.attempts.map(function (a) {
      return '<div class="gp-row"><span class="gp-label">attempt ' + a.attempt +
        (a.cause ? ' · ' + esc(a.cause) : '') +
        (a.resumed_from !== null ? ' · resumed from ' + a.resumed_from : '') + '</span>' +
        bar(a.ms, a.wall_ms) + '</div>';
    }).join('');
    html += '<div class="legend">' + cats.map(function (c) {
      return '<span class="swatch gp-' + c + '"></span><span>' + GOODPUT_LABELS[c] + '</span>';
    }).join('') + '</div>';
    $('#goodput').innerHTML = html;
  }

  function renderFindings() {
    var el = $('#findings');
    if (!st || !st.run) { el.innerHTML = ''; document.body.dataset.findings = 0; return; }
    var list = st.findings.slice().sort(function (a, b) {
      var sa = a.severity === 'critical' ? 0 : 1, sb = b.severity === 'critical' ? 0 : 1;
      return sa - sb || a.first_step - b.first_step;
    });
    if (!list.length) {
      el.innerHTML = '<div class="empty">' + (following() ? 'Nothing detected so far.' : 'Nothing detected in this run.') + '</div>';
    } else {
      el.innerHTML = list.map(function (f) {
        var facts = '<b>' + esc(fmtRanks(f.ranks)) + '</b>';
        if (f.phase) facts += ' · phase <b>' + esc(f.phase) + '</b>';
        facts += ' · steps ' + fmtInt(f.first_step) + '–' + fmtInt(f.last_step);
        return '<div class="finding ' + esc(f.severity) + '" data-kind="' + esc(f.kind) +
               '" data-ranks="' + esc((f.ranks || []).join(',')) + '" data-first="' + f.first_step +
               '" data-last="' + f.last_step + '" title="zoom the charts to these steps">' +
               '<div class="sev">' + esc(f.severity) + '</div>' +
               '<div class="what"><span class="kind">' + esc(humanKind(f.kind)) + '</span>' +
               '<span class="facts">' + facts + '</span></div>' +
               '<div class="msg">' + esc(f.message) + '</div></div>';
      }).join('');
    }
    document.body.dataset.findings = list.length;
  }

  /* The host chart: run-queue delay and stopped time per step, median rank
   * and worst rank; hidden when the run has no host evidence. */
  function renderHost() {
    var panel = $('#panel-host'), el = $('#chart-host');
    var h = st && st.host, n = h ? h.steps.length : 0;
    var runq = hostAcross(h ? h.runq : [], n), stopped = hostAcross(h ? h.stopped : [], n);
    var any = hasAny(runq.worst) || hasAny(stopped.worst);
    panel.hidden = !any;
    document.body.dataset.hostSteps = any ? n : 0;
    if (!any) {
      if (charts.host) { charts.host.destroy(); charts.host = null; }
      return;
    }
    /* the worst ranks of the data shown (the legend reads them live) */
    charts.hostWho = { runq: runq.who, stopped: stopped.who, ranks: h.ranks };
    function ranked(key) {
      return function (u, v, si, idx) {
        var w = charts.hostWho, r = idx == null ? null : w[key][idx];
        return fmtMs(v) + (r == null || v == null ? '' : ' (rank ' + w.ranks[r] + ')');
      };
    }
    var data = [h.steps, runq.med, runq.worst, stopped.med, stopped.worst];
    if (charts.host && charts.hostN === h.ranks.length) {
      charts.host.setData(data);
      return;
    }
    if (charts.host) charts.host.destroy();
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
    charts.host = new uPlot(o, data, el);
    charts.hostN = h.ranks.length;
  }

  /* RANK's median per step of host series ROWS over the host window. */
  function hostMedian(rows, rank) {
    var h = st.host;
    if (!h) return null;
    var k = h.ranks.indexOf(rank);
    return k < 0 ? null : median(rows[k] || []);
  }

  function stoppedCell(rank) {
    var h = st.host, k = h ? h.ranks.indexOf(rank) : -1;
    if (k < 0) return '<span class="dash">–</span>';
    var row = h.stopped[k] || [], known = row.filter(isNum);
    if (!known.length) return '<span class="dash">–</span>';
    var hit = known.filter(function (v) { return v > 0; }).length;
    return fmtMs(median(known)) + (hit ? ' · ' + hit + '/' + known.length + ' steps' : '');
  }

  function renderRanks() {
    var body = $('#ranks tbody');
    if (!st || !st.ranks.length) {
      body.innerHTML = '<tr><td colspan="12" class="muted">' + (st && st.run ? 'No ranks recorded.' : 'Loading…') + '</td></tr>';
      return;
    }
    var blamed = blamedRanks(), live = !STATIC && st.run && st.run.live && !st.lost;
    body.innerHTML = st.ranks.map(function (r) {
      var state = r.state || 'unknown';
      var exit = '';
      if (isNum(r.signal) && r.signal > 0) exit = ' (signal ' + r.signal + ')';
      else if (isNum(r.exit_code) && r.exit_code !== 0) exit = ' (exit ' + r.exit_code + ')';
      var drops = (r.dropped_events == null && r.dropped_records == null) ? null
                : (r.dropped_events || 0) + (r.dropped_records || 0) === 0 ? '0'
                : fmtInt(r.dropped_events || 0) + ' events, ' + fmtInt(r.dropped_records || 0) + ' records';
      return '<tr class="' + (blamed[r.rank] !== undefined ? 'blamed' : '') + '">' +
        '<td class="num">' + esc(r.rank) + '</td>' +
        '<td class="nowrap"><span class="state ' + esc(state) + '">' + esc(state.replace(/_/g, ' ')) + '</span>' + esc(exit) + '</td>' +
        '<td>' + dash(r.host, esc) + '</td>' +
        '<td class="num">' + dash(r.pid, esc) + '</td>' +
        '<td class="num">' + dash(r.last_step, fmtInt) + '</td>' +
        '<td>' + (r.phase ? esc(r.phase) : '<span class="dash">–</span>') + '</td>' +
        '<td class="num">' + (live && isNum(r.last_heard_s) ? fmtAgo(r.last_heard_s) : '<span class="dash">–</span>') + '</td>' +
        '<td class="num">' + dash(r.median_step_ms, fmtMs) + '</td>' +
        '<td class="num">' + dash(r.max_rss_bytes, fmtBytes) + '</td>' +
        '<td class="num">' + (drops === null ? '<span class="dash">–</span>' : drops) + '</td>' +
        '<td class="num">' + dash(hostMedian(st.host ? st.host.runq : [], r.rank), fmtMs) + '</td>' +
        '<td class="num nowrap">' + stoppedCell(r.rank) + '</td></tr>';
    }).join('');
  }

  function fmtAgo(s) {
    if (s < 0) return '<span class="dash">never</span>';
    return (s < 10 ? s.toFixed(1) : Math.round(s)) + ' s ago';
  }

  function renderEvents() {
    var el = $('#events');
    if (!st || !st.events.length) {
      el.innerHTML = '<li class="muted">' + (st && st.run ? 'No events.' : '') + '</li>';
      return;
    }
    var html = '';
    for (var i = st.events.length - 1, n = 0; i >= 0 && n < 300; i--, n++) {
      var e = st.events[i];
      var cls = ROUTINE_EVENTS[e.kind] ? 'routine' : BAD_EVENTS[e.kind] ? 'bad' : '';
      html += '<li class="' + cls + '"><span class="at">' + fmtTimeMs(e.at) + '</span>' +
              '<span class="rk">' + (isNum(e.rank) ? 'rank ' + e.rank : '') + '</span>' +
              '<span class="kind">' + esc(String(e.kind).replace(/_/g, ' ')) + '</span>' +
              '<span class="msg">' + (e.message ? esc(e.message) : '') + '</span></li>';
    }
    el.innerHTML = html;
  }

  /* ---- history: the comparable runs of one name (GET /api/history) ----
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

  var hv = { name: null, gen: 0, doc: null, charts: [], namesKey: null };
  var VERDICT_COLORS = { regressed: '--critical', suspect: '--warning', improved: '--ok', same: '--median' };
  var VERDICT_WORDS = { regression: 'regression', ok: 'no regression', cannot_judge: 'cannot judge' };

  function runNames() {
    var seen = {}, names = [];
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

  /* ---- start ---- */

  function onResize() {
    eachChart(function (u, spec) { u.setSize({ width: chartWidth($(spec.el)), height: spec.height }); });
    if (charts.host) charts.host.setSize({ width: chartWidth($('#chart-host')), height: 200 });
    updateCharts(!zoomed);
    if (st) renderHeat();
    hv.charts.forEach(function (u) { u.setSize({ width: chartWidth(u.root.parentNode), height: 150 }); });
  }

  function onTheme() {
    heatLut = null;
    destroyCharts();
    if (st) render();
    if (hv.doc) renderHistory();
  }

  function bind() {
    var resizeTimer = null;
    window.addEventListener('resize', function () {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(onResize, 100);
    });
    if (window.matchMedia) {
      var mq = window.matchMedia('(prefers-color-scheme: dark)');
      if (mq.addEventListener) mq.addEventListener('change', onTheme);
    }
    var canvas = $('#heat-canvas');
    canvas.addEventListener('mousemove', heatHover);
    canvas.addEventListener('mouseleave', function () { $('#heat-tip').hidden = true; });
    $('#findings').addEventListener('click', function (ev) {
      var f = ev.target.closest('.finding');
      if (f) zoomTo(+f.dataset.first, +f.dataset.last);
    });
    ['steps', 'phases'].forEach(function (which) {
      $('#clip-' + which).addEventListener('click', function () {
        clipSpikes = !clipSpikes;
        updateCharts(true);
        renderClip('steps');
        renderClip('phases');
      });
    });
    $('#views').addEventListener('click', function (ev) {
      var btn = ev.target.closest('button');
      if (btn) setView(btn.dataset.view);
    });
    $('#history-name').addEventListener('change', function (ev) {
      if (ev.target.value) showHistory(ev.target.value);
    });
    $('#run-select').addEventListener('change', function (ev) {
      var id = +ev.target.value;
      if (id) selectRun(id);
    });
  }

  function startStatic() {
    var d = STATIC;
    var run = d.run && d.run.run;
    st = newRunState(run ? run.id : null);
    st.run = run;
    st.summary = d.run && d.run.summary;
    (d.step_pages || []).forEach(function (p) { addSteps(p.steps || []); });
    addHeat(d.heatmap, false);
    addHost(d.host, false);
    st.ranks = (d.ranks && d.ranks.ranks) || [];
    st.findings = (d.findings && d.findings.findings) || [];
    addEvents((d.events && d.events.events) || []);
    st.goodput = (d.goodput && d.goodput.goodput) || null;
    var sel = $('#run-select');
    sel.innerHTML = '<option>#' + esc(run ? run.id : '?') + ' ' + esc(run ? run.name : '') + '</option>';
    $('.run-pick').hidden = true;
    $('#views').hidden = true; /* a report file holds one run */
    document.body.dataset.runId = st.id;
    $('#footer').textContent = 'Generated by stepscope ' + (d.version || '') + ' report --html on ' +
      fmtTime(d.generated_at, true) + (d.db ? ' from ' + d.db : '') + '.';
    render();
  }

  function startServed() {
    $('#footer').textContent = 'stepscope dashboard · polls the controller every second while a run is live';
    function pollRuns() {
      if (st && st.failures) {
        setTimeout(pollRuns, RUNS_POLL_MS);
        return;
      }
      loadRuns().then(function (runs) {
        setConn(null);
        if (st) return;
        var id = chooseInitialRun(runs);
        var wantHistory = /^#history(?:=(.*))?$/.exec(location.hash);
        if (id !== null) {
          selectRun(id);
          if (wantHistory) {
            setView('history', wantHistory[1] ? decodeURIComponent(wantHistory[1]) : null);
          }
        } else {
          document.body.dataset.state = 'empty';
          $('#run-title').textContent = 'No runs in this store yet';
          $('#run-meta').textContent = 'Start one with `stepscope run -n N -- CMD`; it appears here.';
        }
      }, function (e) {
        setConn(e.status ? 'server error: ' + e.message : 'connection lost · retrying');
      }).then(function () { setTimeout(pollRuns, RUNS_POLL_MS); });
    }
    pollRuns();
  }

  bind();
  document.body.dataset.view = 'run';
  if (STATIC) startStatic();
  else startServed();
})();
