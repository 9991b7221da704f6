/*
 * runs.js - the run picker in the header (served only): the store's runs
 * (GET /api/runs, kept in ssDash.runsList for the History view too), which
 * run the page opens first, and the picker's line of the run shown.
 */
(function (ss) {
  'use strict';

  var $ = ss.$, esc = ss.esc, isNum = ss.isNum, fmtInt = ss.fmtInt, api = ss.api;

  /* Fetches the runs and redraws the picker: a Promise of the list. */
  function loadRuns() {
    return api('runs').then(function (doc) {
      ss.runsList = doc.runs || [];
      renderPicker();
      ss.historyView.runsChanged();
      return ss.runsList;
    });
  }

  /* The run to open first among RUNS: the one the URL names (#run=ID),
   * else the latest live one, else the latest; null when there is none. */
  function chooseInitialRun(runs) {
    var m = /(?:^|[#&])run=(\d+)/.exec(location.hash);
    if (m && runs.some(function (r) { return r.id === +m[1]; })) return +m[1];
    for (var i = runs.length - 1; i >= 0; i--) if (runs[i].live) return runs[i].id;
    return runs.length ? runs[runs.length - 1].id : null;
  }

  /* The picker's line for the run shown follows its latest state. */
  function updatePickerEntry() {
    var st = ss.st, runsList = ss.runsList;
    for (var i = 0; i < runsList.length; i++) {
      var r = runsList[i];
      if (r.id !== st.id) continue;
      r.status = st.run.status;
      r.live = st.run.live;
      if (st.summary && isNum(st.summary.steps)) r.steps = st.summary.steps;
      renderPicker();
    }
  }

  function renderPicker() {
    var st = ss.st, runsList = ss.runsList;
    var sel = $('#run-select');
    if (ss.STATIC) return;
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

  ss.runs = { loadRuns: loadRuns, chooseInitialRun: chooseInitialRun,
              updatePickerEntry: updatePickerEntry };
})(window.ssDash);
