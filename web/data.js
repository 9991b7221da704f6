/*
 * data.js - the run shown, as the dashboard keeps it in memory.
 *
 * ssDash.st is one such state (newRunState); the functions here fold the
 * API's documents into it: steps (per-step summaries across ranks, phases
 * by their self time), heat-map columns, host columns and events.  While a
 * live run is followed, the oldest steps and columns are dropped so that
 * memory stays bounded; a report file keeps everything it carries.
 */
(function (ss) {
  'use strict';

  var MAX_STEPS = 20000;     /* steps kept while following a live run */
  var STATIC = ss.STATIC, HEAT_STEPS = ss.HEAT_STEPS, PHASE_COLORS = ss.PHASE_COLORS;
  var isNum = ss.isNum, num = ss.num, median = ss.median;

  /* A fresh state for run ID (null: none yet). */
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
      ranks: [], findings: [], stacks: null, events: [], lastEventId: 0,
      streamFailed: false
    };
  }

  function addStep(s) {
    var st = ss.st;
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
    var st = ss.st;
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

  /* HEAT: a heatmap document; APPEND: its columns follow the ones kept.
   * Keeps per rank the step time (rows), the lateness at the step's first
   * sync point (late) and each phase's self time (phases[name]). */
  function addHeat(doc, append) {
    var st = ss.st;
    if (!doc || !doc.ranks || !doc.steps) return;
    var h = st.heat;
    var docPhases = doc.phase_self_ms || {};
    function copyRows(a) { return (a || doc.ranks.map(function () { return []; })).map(function (r) { return r.slice(); }); }
    if (!append || !h || h.ranks.length !== doc.ranks.length) {
      st.heat = { ranks: doc.ranks.slice(), steps: doc.steps.slice(),
                  rows: copyRows(doc.step_ms), late: doc.late_ms ? copyRows(doc.late_ms) : null,
                  phases: {} };
      for (var name in docPhases) st.heat.phases[name] = copyRows(docPhases[name]);
    } else {
      var last = h.steps.length ? h.steps[h.steps.length - 1] : -Infinity;
      if (doc.late_ms && !h.late) h.late = h.rows.map(function (row) { return row.map(function () { return null; }); });
      for (name in docPhases) {
        if (!h.phases[name]) h.phases[name] = h.rows.map(function (row) { return row.map(function () { return null; }); });
      }
      for (var c = 0; c < doc.steps.length; c++) {
        if (doc.steps[c] <= last) continue;
        h.steps.push(doc.steps[c]);
        for (var r = 0; r < h.rows.length; r++) {
          h.rows[r].push(doc.step_ms[r] ? doc.step_ms[r][c] : null);
          if (h.late) h.late[r].push(doc.late_ms && doc.late_ms[r] ? doc.late_ms[r][c] : null);
          for (name in h.phases) {
            var m = docPhases[name];
            h.phases[name][r].push(m && m[r] ? m[r][c] : null);
          }
        }
      }
    }
    h = st.heat;
    if (!STATIC && h.steps.length > HEAT_STEPS) {
      var cut = h.steps.length - HEAT_STEPS;
      h.steps.splice(0, cut);
      h.rows.forEach(function (row) { row.splice(0, cut); });
      if (h.late) h.late.forEach(function (row) { row.splice(0, cut); });
      for (name in h.phases) h.phases[name].forEach(function (row) { row.splice(0, cut); });
    }
  }

  /* DOC: a host document (/api/runs/{id}/host); APPEND: its steps follow
   * the ones kept.  Keeps run-queue delay and stopped time per rank. */
  function addHost(doc, append) {
    var st = ss.st;
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
    var st = ss.st;
    for (var i = 0; i < list.length; i++) {
      var e = list[i];
      if (isNum(e.id) && e.id <= st.lastEventId) continue;
      st.events.push(e);
      if (isNum(e.id)) st.lastEventId = e.id;
    }
    if (st.events.length > 2000) st.events.splice(0, st.events.length - 2000);
  }

  ss.data = { newRunState: newRunState, addSteps: addSteps, addHeat: addHeat,
              addHost: addHost, hostAcross: hostAcross, addEvents: addEvents };
})(window.ssDash);
