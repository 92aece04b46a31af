// The Carapace console page: one server-sent event stream (/api/events) feeds every panel;
// answers go to /api/answer with the visit's CSRF token. Everything an agent could have
// written (commands, paths, messages) is put in the page as text, never as HTML.
'use strict';

const MAX_RECORDS = 5000;
const SHOWN_RECORDS = 500;
const LAYERS = ['history', 'tool-call', 'kernel'];
const LAYER_COLOURS = { 'history': '#1f5fbf', 'tool-call': '#b26a00', 'kernel': '#6a1b9a' };

const state = {
  csrf: '',
  uid: null,
  sessions: [],
  approvals: new Map(),
  rules: [],
  records: [],
  recordings: [],
  lastSeq: 0,
};

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === 'class') node.className = v;
    else if (k.startsWith('data-')) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function when(secs) {
  if (!secs) return '';
  return new Date(secs * 1000).toLocaleString();
}

function recordTime(r) {
  const t = Date.parse(r.ts);
  return Number.isNaN(t) ? 0 : t;
}

// ---- pages ----------------------------------------------------------------------------

function showPage() {
  const page = (location.hash || '#sessions').slice(1);
  for (const s of document.querySelectorAll('.page')) {
    s.classList.toggle('shown', s.id === 'page-' + page);
  }
  for (const a of document.querySelectorAll('nav a')) {
    a.classList.toggle('active', a.dataset.page === page);
  }
  if (page === 'charts') renderCharts();
}
window.addEventListener('hashchange', showPage);

// ---- sessions -------------------------------------------------------------------------

// A record belongs to a session by its Carapace session (`carapace run`, the kernel) or,
// for hook callers, by the agent's own session id the call named.
function inSession(r, s) {
  return r.session === s.id || (s.external_id && r.agent_session === s.external_id);
}

function countsOf(s) {
  const counts = {};
  for (const r of state.records) {
    if (!inSession(r, s) || !r.layer || !r.decision) continue;
    const layer = (counts[r.layer] ||= {});
    layer[r.decision] = (layer[r.decision] || 0) + 1;
  }
  return counts;
}

// How a session's rules act: shadow (refusals recorded as would-deny, not enforced),
// record (what it touches is kept for a proposed allow-list) or enforce.
function modeOf(s) {
  return s.shadow ? 'shadow' : s.record ? 'record' : 'enforce';
}

// Record sessions, running or ended, whose proposed allow-list can be reviewed.
function renderRecordings() {
  const body = document.querySelector('#recordings-table tbody');
  body.replaceChildren();
  for (const r of state.recordings) {
    body.append(el('tr', { 'data-id': r.id, 'data-live': r.live },
      el('td', { class: 'mono' }, r.id),
      el('td', { class: 'mono' }, (r.command || []).join(' ')),
      el('td', {}, String(r.owner_uid)),
      el('td', {}, when(r.started)),
      el('td', {}, r.live ? 'running' : 'ended'),
      el('td', {}, el('button', { type: 'button', class: 'record-propose', 'data-session': r.id,
        onclick: () => offerRecord(r.id) }, 'Review the proposed allow-list…'))));
  }
  document.getElementById('no-recordings').hidden = state.recordings.length > 0;
}

function renderSessions() {
  const body = document.querySelector('#sessions-table tbody');
  body.replaceChildren();
  for (const s of state.sessions) {
    const counts = countsOf(s);
    const layerCells = LAYERS.filter((l) => counts[l]).map((l) =>
      el('div', { 'data-layer': l },
        el('span', { class: 'layer' + (l === 'kernel' ? ' kernel' : '') }, l), ' ',
        Object.entries(counts[l]).map(([d, n]) => el('span', { class: 'd-' + d, 'data-decision': d, 'data-count': n }, `${d} ${n} `))));
    const activated = s.activated.map((r) =>
      el('div', { title: r.reason }, el('span', { class: 'mono' }, r.id), ' ',
        el('span', { class: 'lock' }, r.reason)));
    body.append(el('tr', { 'data-id': s.id, 'data-mode': modeOf(s) },
      el('td', { class: 'mono' }, s.id, s.external_id ? el('div', { class: 'lock' }, s.external_id) : null),
      el('td', {}, s.agent || s.kind, s.shadow
        ? el('div', { class: 'shadow', title: 'refusals are recorded as would-deny, not enforced; self-protection still refuses' }, 'shadow mode')
        : null, s.profile
        ? el('div', { class: 'profile', title: 'runs under $CARAPACE_DATA_DIR/profiles/' + s.profile + '.yaml instead of the main rules' }, 'profile ' + s.profile)
        : null, s.record
        ? el('div', {}, el('button', { type: 'button', class: 'record-propose', 'data-session': s.id,
          title: 'what this session touched, as an allow-list rule file to review',
          onclick: () => offerRecord(s.id) }, 'record: proposed allow-list'))
        : null),
      el('td', { class: 'mono' }, (s.command || []).join(' ')),
      el('td', {}, String(s.owner_uid)),
      el('td', {}, when(s.created)),
      el('td', {}, activated.length ? activated : '—'),
      el('td', {}, layerCells.length ? layerCells : '—')));
  }
  document.getElementById('no-sessions').hidden = state.sessions.length > 0;
  const select = document.getElementById('f-session');
  const chosen = select.value;
  select.replaceChildren(el('option', { value: '' }, 'all'),
    ...state.sessions.map((s) => el('option', { value: s.id }, s.id)));
  select.value = chosen;
}

// ---- approvals ------------------------------------------------------------------------

async function answer(id, how, card) {
  for (const b of card.querySelectorAll('button')) b.disabled = true;
  const resp = await fetch('/api/answer', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Carapace-Csrf': state.csrf },
    body: JSON.stringify({ id, answer: how }),
    credentials: 'same-origin',
  });
  if (resp.ok) {
    const a = await resp.json();
    state.approvals.set(a.id, a);
  } else {
    card.querySelector('.error').textContent = await resp.text();
    for (const b of card.querySelectorAll('button')) b.disabled = false;
  }
  renderApprovals();
}

function ruleList(rules) {
  return el('ul', {}, rules.map((r) =>
    el('li', { 'data-rule': r.id }, el('span', { class: 'mono' }, r.id), ': ', r.message)));
}

function renderApprovals() {
  const list = document.getElementById('approvals-list');
  list.replaceChildren();
  const pending = [...state.approvals.values()].filter((a) => a.status === 'pending')
    .sort((a, b) => a.created - b.created);
  for (const a of pending) {
    const card = el('div', { class: 'card', 'data-approval': a.id });
    const steps = a.steps.length ? el('ol', {}, a.steps.map((s) =>
      el('li', {}, el('span', { class: 'mono' }, s.operation), ' — ',
        el('span', { class: 'd-' + s.decision }, s.decision), ruleList(s.rules)))) : null;
    card.append(...[
      el('div', { class: 'meta' }, `${a.kind} ${a.id}`, a.session_id ? ` · session ${a.session_id}` : '',
        ` · ${when(a.created)}`,
        a.asked > 1 ? el('span', { class: 'asked', 'data-asked': a.asked }, `asked ${a.asked} times`) : null),
      el('div', { class: 'op' }, a.operation),
      el('div', { class: 'meta' }, 'Gated by:'),
      ruleList(a.rules),
      steps,
      el('div', {},
        el('button', { class: 'small', type: 'button', 'data-allow-approval': a.id, onclick: () => offerAllow({ approval: a.id }) }, 'Allow this from now on…')),
      el('div', {},
        el('button', { class: 'allow', type: 'button', 'data-answer': 'once', onclick: () => answer(a.id, 'once', card) }, 'Allow once'),
        el('button', { class: 'session', type: 'button', 'data-answer': 'session', onclick: () => answer(a.id, 'session', card) }, 'Allow for this session'),
        el('button', { class: 'deny', type: 'button', 'data-answer': 'deny', onclick: () => answer(a.id, 'deny', card) }, 'Deny')),
      el('div', { class: 'error d-block' })].filter((c) => c));
    list.append(card);
  }
  document.getElementById('no-approvals').hidden = pending.length > 0;
  document.getElementById('pending-count').textContent = pending.length ? String(pending.length) : '';
}

// ---- timeline -------------------------------------------------------------------------

function matches(r) {
  const session = document.getElementById('f-session').value;
  const decision = document.getElementById('f-decision').value;
  const layer = document.getElementById('f-layer').value;
  const rule = document.getElementById('f-rule').value.trim();
  const chosen = state.sessions.find((s) => s.id === session);
  return (!session || (chosen ? inSession(r, chosen) : r.session === session))
    && (!decision || r.decision === decision)
    && (!layer || r.layer === layer)
    && (!rule || (r.rules || []).some((x) => x.id.includes(rule)));
}

function renderTimeline() {
  const body = document.querySelector('#timeline-table tbody');
  body.replaceChildren();
  const shown = [];
  for (let i = state.records.length - 1; i >= 0 && shown.length < SHOWN_RECORDS; i--) {
    if (matches(state.records[i])) shown.push(state.records[i]);
  }
  for (const r of shown) {
    body.append(el('tr', { 'data-seq': r.seq, 'data-decision': r.decision || '', 'data-kind': r.kind },
      el('td', {}, String(r.seq)),
      el('td', {}, new Date(recordTime(r)).toLocaleTimeString()),
      el('td', {}, r.kind),
      el('td', { class: 'mono' }, r.session || r.agent_session || ''),
      el('td', {}, r.layer || ''),
      el('td', { class: 'd-' + (r.decision || '') }, r.decision || ''),
      el('td', {}, r.tool || ''),
      el('td', { class: 'mono' }, (r.rules || []).map((x) => x.id).join(', ')),
      el('td', { class: 'mono' }, r.detail || r.error || ''),
      el('td', {}, refusal(r) ? el('button', { class: 'small', type: 'button', 'data-allow': r.seq,
        onclick: () => offerAllow({ record: r.seq }) }, 'Allow from now on…') : null)));
  }
}

// ---- allow this from now on -----------------------------------------------------------

// A record a rule refused (or asked about) that names an operation.
function refusal(r) {
  return (r.decision === 'block' || r.decision === 'approve')
    && (r.kind === 'evaluate' || r.kind === 'kernel-denial')
    && (r.rules || []).some((x) => x.mode === 'block' || x.mode === 'approve');
}

let allowFrom = null;

async function postAllow(body) {
  return fetch('/api/allow', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Carapace-Csrf': state.csrf },
    body: JSON.stringify(body),
    credentials: 'same-origin',
  });
}

function diffLines(diff) {
  return diff.split('\n').filter((l) => l !== '').map((l) =>
    el('span', { class: l.startsWith('+') && !l.startsWith('+++') ? 'add'
      : l.startsWith('-') && !l.startsWith('---') ? 'del' : '' }, l + '\n'));
}

// Shows the proposed change for one refusal: the diff, and what the safety check found.
async function offerAllow(from) {
  allowFrom = from;
  const panel = document.getElementById('allow-panel');
  panel.hidden = false;
  for (const id of ['allow-op', 'allow-where', 'allow-diff', 'allow-notes', 'allow-check', 'allow-result', 'allow-error']) {
    document.getElementById(id).replaceChildren();
  }
  document.getElementById('allow-confirm').checked = false;
  document.getElementById('allow-confirm-label').hidden = true;
  document.getElementById('allow-always').disabled = true;
  document.getElementById('allow-op').textContent = 'checking…';
  panel.scrollIntoView();
  const resp = await postAllow(from);
  if (!resp.ok) {
    document.getElementById('allow-op').textContent = '';
    document.getElementById('allow-error').textContent = await resp.text();
    return;
  }
  const o = await resp.json();
  panel.dataset.rule = o.rule;
  document.getElementById('allow-op').textContent = o.operation;
  document.getElementById('allow-where').textContent =
    `an exception to rule ${o.rule} (${o.source}) in ${o.file} · from ${o.from}`;
  document.getElementById('allow-diff').replaceChildren(...diffLines(o.diff));
  document.getElementById('allow-notes').replaceChildren(...o.notes.map((n) => el('li', {}, n)));
  const check = document.getElementById('allow-check');
  const head = `Safety check: ${o.fixtures_checked} must-block cases of the built-in packs and `
    + `${o.history_checked} operations of the session replayed. `;
  if (!o.newly_allowed.length) {
    check.replaceChildren(el('p', { 'data-newly-allowed': 0 }, head, 'Nothing else would be allowed.'));
  } else {
    check.replaceChildren(el('p', { 'data-newly-allowed': o.newly_allowed.length }, head,
      `${o.newly_allowed.length} would newly be allowed:`),
    el('ul', {}, o.newly_allowed.map((n) => el('li', { class: n.must_block ? 'must-block' : '', 'data-must-block': n.must_block },
      n.must_block ? 'MUST-BLOCK ' : '', el('span', { class: 'mono' }, n.origin), ` (was ${n.was}): `,
      el('span', { class: 'mono' }, n.what)))));
  }
  document.getElementById('allow-confirm-label').hidden = !o.needs_confirmation;
  document.getElementById('allow-always').disabled = false;
}

document.getElementById('allow-cancel').addEventListener('click', () => {
  document.getElementById('allow-panel').hidden = true;
  allowFrom = null;
});

document.getElementById('allow-always').addEventListener('click', async () => {
  if (!allowFrom) return;
  const button = document.getElementById('allow-always');
  button.disabled = true;
  const panel = document.getElementById('allow-panel');
  const resp = await postAllow({ ...allowFrom, rule: panel.dataset.rule, write: true,
    confirm: document.getElementById('allow-confirm').checked });
  if (resp.ok) {
    const o = await resp.json();
    const result = document.getElementById('allow-result');
    result.dataset.written = 'true';
    result.textContent = `Written to ${o.file} and reloaded: ${o.reload.rules} rules in force `
      + `(${o.reload.kernel_rules} in the kernel).`;
    document.getElementById('allow-error').textContent = '';
  } else {
    document.getElementById('allow-error').textContent = await resp.text();
    button.disabled = false;
  }
});
// ---- record mode: the proposed allow-list of a record session -------------------------

let recordSession = null;

async function postRecord(body) {
  return fetch('/api/record', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Carapace-Csrf': state.csrf },
    body: JSON.stringify(body),
    credentials: 'same-origin',
  });
}

async function offerRecord(id) {
  recordSession = id;
  const panel = document.getElementById('record-panel');
  panel.hidden = false;
  for (const x of ['record-text', 'record-result', 'record-error']) {
    document.getElementById(x).replaceChildren();
  }
  document.getElementById('record-save').disabled = true;
  document.getElementById('record-where').textContent = `session ${id}: checking…`;
  panel.scrollIntoView();
  const resp = await postRecord({ session: id });
  if (!resp.ok) {
    document.getElementById('record-where').textContent = '';
    document.getElementById('record-error').textContent = await resp.text();
    return;
  }
  const p = await resp.json();
  document.getElementById('record-where').textContent =
    `session ${id}: compiled, and the ${p.fixtures_checked} must-block cases of the built-in packs stay refused. Review it before saving.`;
  document.getElementById('record-panel').dataset.session = id;
  document.getElementById('record-text').textContent = p.text;
  document.getElementById('record-save').disabled = false;
}

document.getElementById('record-cancel').addEventListener('click', () => {
  document.getElementById('record-panel').hidden = true;
  recordSession = null;
});

document.getElementById('record-save').addEventListener('click', async () => {
  if (!recordSession) return;
  const button = document.getElementById('record-save');
  button.disabled = true;
  const result = document.getElementById('record-result');
  result.textContent = '';
  delete result.dataset.written;
  document.getElementById('record-error').textContent = '';
  const resp = await postRecord({ session: recordSession,
    write: document.getElementById('record-name').value,
    force: document.getElementById('record-force').checked });
  if (resp.ok) {
    const p = await resp.json();
    result.dataset.written = p.written;
    result.textContent = `Saved as ${p.written}.`;
    document.getElementById('record-error').textContent = '';
  } else {
    document.getElementById('record-error').textContent = await resp.text();
  }
  button.disabled = false;
});

for (const id of ['f-session', 'f-decision', 'f-layer', 'f-rule']) {
  document.getElementById(id).addEventListener('input', renderTimeline);
}

async function verifyLedger() {
  const badge = document.getElementById('ledger');
  badge.textContent = 'ledger: verifying…';
  try {
    const v = await (await fetch('/api/verify', { credentials: 'same-origin' })).json();
    badge.className = 'badge ' + (v.ok ? 'ok' : 'bad');
    const at = new Date().toLocaleTimeString();
    badge.textContent = v.ok ? `ledger verified: ${v.records} records (${at})` : `ledger: ${v.problem}`;
    badge.title = v.ok ? `last hash ${v.last_hash}` : '';
  } catch (e) {
    badge.className = 'badge bad';
    badge.textContent = 'ledger: cannot verify';
  }
}
document.getElementById('verify').addEventListener('click', verifyLedger);

// ---- rules ----------------------------------------------------------------------------

function renderRules() {
  const body = document.querySelector('#rules-table tbody');
  body.replaceChildren();
  for (const r of state.rules) {
    body.append(el('tr', { 'data-rule': r.id },
      el('td', { class: 'mono' }, r.id, r.locked ? el('div', { class: 'lock' }, 'locked') : null,
        r.session_rule ? el('div', { class: 'lock' }, 'session rule (trigger)') : null),
      el('td', { class: 'd-' + r.mode }, r.mode),
      el('td', {}, r.layers.map((l) => el('span', { class: 'layer' + (l === 'kernel' ? ' kernel' : '') }, l)),
        r.kernel_note ? el('div', { class: 'lock' }, 'not in the kernel: ' + r.kernel_note) : null),
      el('td', { class: 'mono' }, r.source.startsWith('builtin:') ? r.source : `${r.source}:${r.line}`),
      el('td', {}, r.message)));
  }
}

// ---- charts (inline SVG) --------------------------------------------------------------

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const c of children.flat(Infinity)) {
    if (c !== undefined && c !== null) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function renderCharts() {
  // Decisions per minute and layer over the last 30 minutes.
  const minutes = 30;
  const now = Date.now();
  const start = now - minutes * 60000;
  const series = Object.fromEntries(LAYERS.map((l) => [l, new Array(minutes).fill(0)]));
  for (const r of state.records) {
    const t = recordTime(r);
    if (!r.layer || !series[r.layer] || t < start) continue;
    const i = Math.min(minutes - 1, Math.floor((t - start) / 60000));
    series[r.layer][i] += 1;
  }
  const max = Math.max(1, ...LAYERS.flatMap((l) => series[l]));
  const W = 720, H = 200, P = 30;
  const x = (i) => P + (i * (W - 2 * P)) / (minutes - 1);
  const y = (v) => H - P - (v * (H - 2 * P)) / max;
  const time = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'decisions per minute and layer' },
    svg('line', { x1: P, y1: H - P, x2: W - P, y2: H - P, stroke: '#999' }),
    svg('line', { x1: P, y1: P, x2: P, y2: H - P, stroke: '#999' }),
    svg('text', { x: 2, y: P + 4, 'font-size': 11 }, String(max)),
    svg('text', { x: 2, y: H - P, 'font-size': 11 }, '0'),
    svg('text', { x: P, y: H - 8, 'font-size': 11 }, `−${minutes} min`),
    svg('text', { x: W - P - 24, y: H - 8, 'font-size': 11 }, 'now'),
    LAYERS.map((l) => svg('polyline', {
      fill: 'none', stroke: LAYER_COLOURS[l], 'stroke-width': 2, 'data-layer': l,
      points: series[l].map((v, i) => `${x(i)},${y(v)}`).join(' '),
    })));
  const legend = el('div', { class: 'legend' }, LAYERS.map((l) =>
    el('span', { style: `color:${LAYER_COLOURS[l]}` }, `■ ${l} (${series[l].reduce((a, b) => a + b, 0)})`)));
  document.getElementById('chart-time').replaceChildren(time, legend);

  // The rules that matched most often.
  const counts = new Map();
  for (const r of state.records) {
    for (const m of r.rules || []) counts.set(m.id, (counts.get(m.id) || 0) + 1);
  }
  const top = [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, 10);
  const topMax = Math.max(1, ...top.map(([, n]) => n));
  const rowH = 22, labelW = 240, barW = 440;
  const bars = svg('svg', { viewBox: `0 0 ${labelW + barW + 60} ${Math.max(1, top.length) * rowH + 8}`, role: 'img', 'aria-label': 'top rules' },
    top.map(([id, n], i) => [
      svg('text', { x: 0, y: i * rowH + 16, 'font-size': 12, 'font-family': 'monospace' }, id),
      svg('rect', { x: labelW, y: i * rowH + 4, width: Math.max(2, (n * barW) / topMax), height: rowH - 8, fill: '#1f5fbf', 'data-rule': id }),
      svg('text', { x: labelW + (n * barW) / topMax + 6, y: i * rowH + 16, 'font-size': 12 }, String(n)),
    ]));
  document.getElementById('chart-rules').replaceChildren(top.length ? bars : el('p', { class: 'empty' }, 'No rule matched yet.'));
}

// ---- the feed -------------------------------------------------------------------------

function addRecord(r) {
  if (r.seq <= state.lastSeq) return false;
  state.lastSeq = r.seq;
  state.records.push(r);
  if (state.records.length > MAX_RECORDS) state.records.splice(0, state.records.length - MAX_RECORDS);
  return true;
}

let renderQueued = false;
function renderSoon() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    renderSessions();
    renderTimeline();
    if (location.hash === '#charts') renderCharts();
  });
}

function connect() {
  const live = document.getElementById('live');
  const events = new EventSource('/api/events');
  events.addEventListener('open', () => { live.className = 'badge ok'; live.textContent = 'live'; });
  events.addEventListener('error', () => { live.className = 'badge off'; live.textContent = 'reconnecting…'; });
  events.addEventListener('snapshot', (e) => {
    const s = JSON.parse(e.data);
    state.csrf = s.csrf;
    state.uid = s.uid;
    state.sessions = s.sessions;
    state.rules = s.rules;
    state.approvals = new Map(s.approvals.map((a) => [a.id, a]));
    state.recordings = s.recordings || [];
    state.records = [];
    state.lastSeq = 0;
    for (const r of s.records) addRecord(r);
    const k = document.getElementById('kernel');
    k.textContent = s.kernel ? 'kernel: ' + s.kernel : '';
    k.title = k.textContent;
    document.body.dataset.ready = 'true';
    renderSessions(); renderRecordings(); renderApprovals(); renderTimeline(); renderRules(); showPage();
  });
  events.addEventListener('record', (e) => { if (addRecord(JSON.parse(e.data))) renderSoon(); });
  events.addEventListener('approval', (e) => {
    const a = JSON.parse(e.data);
    state.approvals.set(a.id, a);
    renderApprovals();
  });
  events.addEventListener('approvals', (e) => {
    state.approvals = new Map(JSON.parse(e.data).map((a) => [a.id, a]));
    renderApprovals();
  });
  events.addEventListener('sessions', (e) => { state.sessions = JSON.parse(e.data); renderSessions(); });
  events.addEventListener('recordings', (e) => { state.recordings = JSON.parse(e.data); renderRecordings(); });
  events.addEventListener('rules', (e) => { state.rules = JSON.parse(e.data); renderRules(); });
}

showPage();
connect();
verifyLedger();
