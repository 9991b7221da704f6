/*
 * findings.js - the Run view's answer, at the top of the page: the
 * headline (the first finding, in the words `stepscope report`, `top` and
 * the end-of-run summary use: its ranks, phase and kind, api/headline.h),
 * the findings list (critical first, then by first step, then by id, the
 * store's order; a click zooms the charts to a finding's steps, app.js
 * binds it), the stacks stored with a hang (or another trigger), and the
 * ranks the findings blame, which the heat map, the phases by rank and
 * the ranks table highlight.
 */
(function (ss) {
  'use strict';

  var $ = ss.$, esc = ss.esc, fmtInt = ss.fmtInt, fmtRanks = ss.fmtRanks, humanKind = ss.humanKind,
      fmtTime = ss.fmtTime, isNum = ss.isNum;

  /* The findings in the store's order: the first is the headline. */
  function ordered() {
    var st = ss.st;
    return st.findings.slice().sort(function (a, b) {
      var sa = a.severity === 'critical' ? 0 : 1, sb = b.severity === 'critical' ? 0 : 1;
      return sa - sb || a.first_step - b.first_step || (a.id || 0) - (b.id || 0);
    });
  }

  /* "rank 2 · phase compute · critical straggler": headline.c's words. */
  function headlineWords(f) {
    var r = f.ranks || [], parts = [];
    if (r.length) {
      parts.push((r.length === 1 ? 'rank ' : 'ranks ') + r.slice(0, 8).join(',') +
                 (r.length > 8 ? ',\u2026 (' + r.length + ')' : ''));
    }
    if (f.phase) parts.push('phase ' + f.phase);
    parts.push((f.severity || 'warning') + ' ' + String(f.kind || 'finding').replace(/_/g, ' '));
    return parts.join(' \u00b7 ');
  }

  /* The first finding of the run shown, or null. */
  function headline() {
    var st = ss.st;
    if (!st || !st.findings || !st.findings.length) return null;
    return ordered()[0];
  }

  function renderHeadline() {
    var st = ss.st, el = $('#headline');
    var f = st && st.run ? headline() : null;
    if (!f) {
      el.hidden = true;
      el.innerHTML = '';
      document.body.dataset.headline = '';
      return;
    }
    var words = headlineWords(f);
    el.hidden = false;
    el.className = 'headline ' + esc(f.severity);
    el.innerHTML = '<div class="hl-words">' + esc(words) + '</div>' +
      '<div class="hl-msg">' + esc(f.message) + '</div>' +
      '<div class="hl-steps">steps ' + fmtInt(f.first_step) + '–' + fmtInt(f.last_step) +
      (st.findings.length > 1 ? ' · ' + (st.findings.length - 1) + ' more finding' +
        (st.findings.length > 2 ? 's' : '') + ' below' : '') + '</div>';
    document.body.dataset.headline = words;
  }

  function renderFindings() {
    var st = ss.st;
    var el = $('#findings');
    renderHeadline();
    renderStacks();
    if (!st || !st.run) { el.innerHTML = ''; document.body.dataset.findings = 0; return; }
    var list = ordered();
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

  var TRIGGERS = { hang: 'on a hang', nonfinite: 'on a non-finite value',
                   divergence: 'on a replica divergence', request: 'on request' };

  /* The stacks stored with the run (the findings document's "stacks"):
   * what every rank was running, ranks with the same stack grouped. */
  function renderStacks() {
    var st = ss.st, panel = $('#panel-stacks');
    var s = st && st.run ? st.stacks : null;
    if (!s || !s.merged_text) {
      panel.hidden = true;
      document.body.dataset.stacks = '';
      return;
    }
    panel.hidden = false;
    var hint = 'taken ' + (TRIGGERS[s.trigger] || 'on request') + ' at ' + fmtTime(s.taken_at, true);
    if (isNum(s.answered) && isNum(s.ranks_total)) hint += ' · ' + s.answered + ' of ' + s.ranks_total + ' ranks answered';
    $('#stacks-hint').innerHTML = hint + ' · ranks with the same stack are grouped';
    $('#stacks').textContent = s.merged_text;
    document.body.dataset.stacks = s.trigger || 'request';
  }

  /* Rank -> the severity of a finding that names it. */
  function blamedRanks() {
    var st = ss.st;
    var set = {};
    st.findings.forEach(function (f) { (f.ranks || []).forEach(function (r) { set[r] = f.severity; }); });
    return set;
  }

  ss.findings = { render: renderFindings, blamedRanks: blamedRanks, headline: headline };
})(window.ssDash);
