/*
 * findings.js - the Run view's findings list (critical first, then by
 * first step; a click zooms the charts to a finding's steps, app.js binds
 * it) and the ranks the findings blame, which the heat map and the ranks
 * table highlight.
 */
(function (ss) {
  'use strict';

  var $ = ss.$, esc = ss.esc, fmtInt = ss.fmtInt, fmtRanks = ss.fmtRanks, humanKind = ss.humanKind;

  function renderFindings() {
    var st = ss.st;
    var el = $('#findings');
    if (!st || !st.run) { el.innerHTML = ''; document.body.dataset.findings = 0; return; }
    var list = st.findings.slice().sort(function (a, b) {
      var sa = a.severity === 'critical' ? 0 : 1, sb = b.severity === 'critical' ? 0 : 1;
      return sa - sb || a.first_step - b.first_step;
    });
    if (!list.length) {
      el.innerHTML = '<div class="empty">' + (ss.following() ? 'Nothing detected so far.' : 'Nothing detected in this run.') + '</div>';
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

  /* Rank -> the severity of a finding that names it. */
  function blamedRanks() {
    var st = ss.st;
    var set = {};
    st.findings.forEach(function (f) { (f.ranks || []).forEach(function (r) { set[r] = f.severity; }); });
    return set;
  }

  ss.findings = { render: renderFindings, blamedRanks: blamedRanks };
})(window.ssDash);
