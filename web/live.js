/*
 * live.js - keeping the run shown up to date (served only).
 *
 * selectRun starts on a run: a fresh state (data.js), then rounds of
 * polling its documents (refresh), once a second while it is going on,
 * fetching only what is new and backing off while the server fails.  While
 * the run is going on its event stream (GET /api/runs/{id}/stream)
 * delivers finalized steps and findings as they happen.  Every answer
 * carries the generation it was asked for: one for a run no longer shown
 * is dropped.
 */
(function (ss) {
  'use strict';

  var INITIAL_STEPS = 2000;  /* steps fetched when a run is opened */
  var POLL_MS = 1000;
  var GOODPUT_EVERY_MS = 15000;
  var HEAT_STEPS = ss.HEAT_STEPS;
  var $ = ss.$, isNum = ss.isNum, api = ss.api, apiUrl = ss.apiUrl,
      setConn = ss.setConn, following = ss.following;

  var gen = 0;            /* bumped when another run is chosen */
  var pollTimer = null;
  var stream = null;      /* EventSource of the live run, if any */
  var renderQueued = false;

  /* Shows run ID from scratch and starts following it. */
  function selectRun(id) {
    gen++;
    clearTimeout(pollTimer);
    closeStream();
    ss.st = ss.data.newRunState(id);
    ss.charts.reset();
    ss.charts.destroy();
    if (history.replaceState) history.replaceState(null, '', '#run=' + id);
    document.body.dataset.state = 'loading';
    document.body.dataset.runId = id;
    $('#run-select').value = String(id);
    ss.overview.render();
    refresh(gen);
  }

  /* One round of polling; rounds never overlap (a call during one makes
   * the next start as soon as it ends). */
  function refresh(g) {
    var st = ss.st;
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
        if (got[0]) ss.data.addSteps(got[0].steps || []);
        if (got[1]) ss.data.addHeat(got[1], heatLast !== null);
        if (got[2]) st.ranks = got[2].ranks || [];
        if (got[3]) { st.findings = got[3].findings || []; st.stacks = got[3].stacks || null; }
        if (got[4]) ss.data.addEvents(got[4].events || []);
        if (got[5]) ss.data.addHost(got[5], hostLast !== null);
        if (got[6]) { st.goodput = got[6].goodput; st.goodputAt = Date.now(); }
        /* an older server without /host is not an error */
        for (var i = 0; i < 5; i++) if (res[i].status === 'rejected') throw res[i].reason;
      });
    }).then(function () {
      if (g !== gen) return;
      st.failures = 0;
      st.lost = false;
      setConn(null);
      ss.runs.updatePickerEntry();
      ss.overview.render();
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
        ss.runs.updatePickerEntry();
        ss.overview.render();
        return;
      }
      if (!e.status && st.run) {
        /* the controller stops serving when its run ends */
        st.lost = true;
        ss.overview.render();
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

  /* The live stream: finalized steps arrive as they happen.  A step that
   * follows the last one drawn is drawn at once; one after a gap (the
   * steps finalized before the stream opened) waits until polling has
   * filled the gap, so the series never have holes.  Any error ends the
   * stream for this run and polling carries on alone. */
  function openStream(g) {
    var st = ss.st;
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
        ss.data.addSteps([s]);
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
      ss.findings.render();
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
      ss.charts.render();
    });
  }

  ss.live = { selectRun: selectRun };
})(window.ssDash);
