// Estuary node dashboard (docs/admin-api.md "Dashboard"). Talks only to the
// admin listener that served it; polls /api/overview each second and keeps
// the last kHistory samples for the charts in memory.
"use strict";

const kHistory = 300;       // samples per chart: five minutes at one a second
const kPollMs = 1000;
const kTokenKey = "estuary-admin-token";
const kPageSize = 50;

let token = sessionStorage.getItem(kTokenKey) || "";
let activeTab = "clients";
const lists = {};            // list name -> {offset, params}
const history = { labels: [], nodes: {} };   // node -> {in: [], out: [], connections: []}
let charts = null;

function el(id) { return document.getElementById(id); }

function text(value) {
  if (value === undefined || value === null) return "";
  return String(value);
}

function cell(row, value) {
  const td = document.createElement("td");
  td.textContent = text(value);
  row.appendChild(td);
  return td;
}

function number(value, digits) {
  if (typeof value !== "number") return "";
  return value.toFixed(digits === undefined ? 0 : digits);
}

function bytes(value) {
  if (typeof value !== "number") return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let unit = 0;
  while (value >= 1024 && unit + 1 < units.length) { value /= 1024; unit++; }
  return value.toFixed(unit === 0 ? 0 : 1) + " " + units[unit];
}

function duration(ms) {
  if (typeof ms !== "number") return "";
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
  return Math.floor(s / 3600) + "h" + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
}

class NeedsToken extends Error {}

// fetch() with the bearer token; a 401 shows the token form. Errors other
// than HTTP ones become a status line, not a console error.
async function api(path, options) {
  const init = Object.assign({ headers: {} }, options || {});
  if (token) init.headers["Authorization"] = "Bearer " + token;
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    throw new Error("cannot reach this node's admin API (" + error.message + ")");
  }
  if (response.status === 401) {
    showTokenForm(token ? "that token was refused" : "");
    throw new NeedsToken("token needed");
  }
  const body = await response.text();
  let json = null;
  try { json = JSON.parse(body); } catch (e) { json = null; }
  if (!response.ok) {
    const why = json && json.error ? json.error : body.trim().slice(0, 200);
    throw new Error("HTTP " + response.status + " for " + path + ": " + why);
  }
  return json;
}

function setStatus(message, isError) {
  const status = el("status");
  status.textContent = message;
  status.className = isError ? "error" : "muted";
}

function showTokenForm(error) {
  el("token-form").hidden = false;
  el("main").hidden = true;
  el("token-error").textContent = error;
}

function nodeStatus(node) {
  if (node.state === "up" && node.reachable) return ["up", "up"];
  if (node.state === "up") return ["down", "down"];         // a member, but its admin API does not answer
  if (node.state === "down" || node.state === "left" || node.state === "suspect") return ["down", "down"];
  return [node.state, "other"];
}

function renderNodes(overview) {
  el("self").textContent = "- node " + overview.self;
  const body = el("nodes").tBodies[0];
  body.replaceChildren();
  for (const node of overview.nodes) {
    const row = document.createElement("tr");
    row.dataset.node = node.node;
    cell(row, node.node + (node.node === overview.self ? " (this)" : ""));
    const [label, kind] = nodeStatus(node);
    const status = cell(row, label);
    status.className = "status " + kind;
    if (node.error) status.title = node.error;
    cell(row, node.state);
    const load = node.load || {};
    cell(row, number(node.score, 1));
    cell(row, load.connections);
    cell(row, number(load.messages_in_per_second, 1));
    cell(row, number(load.messages_out_per_second, 1));
    cell(row, load.queued_messages);
    cell(row, number(load.cpu_percent, 1));
    cell(row, bytes(load.memory_bytes));
    cell(row, node.partitions_led);
    const admin = cell(row, "");
    if (node.admin_address && node.node !== overview.self) {
      const link = document.createElement("a");
      link.href = "http://" + node.admin_address + "/";
      link.textContent = node.admin_address;
      admin.appendChild(link);
    } else {
      admin.textContent = text(node.admin_address);
    }
    body.appendChild(row);
  }
  const alarms = el("alarms");
  alarms.replaceChildren();
  for (const alarm of overview.alarms || []) {
    const item = document.createElement("li");
    item.textContent = alarm;
    alarms.appendChild(item);
  }
}

function makeChart(canvas) {
  if (typeof Chart === "undefined") return null;
  return new Chart(canvas, {
    type: "line",
    data: { labels: history.labels, datasets: [] },
    options: {
      animation: false, responsive: true, maintainAspectRatio: false,
      elements: { point: { radius: 0 } },
      scales: { x: { ticks: { maxTicksLimit: 6 } }, y: { beginAtZero: true } },
    },
  });
}

const kColors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"];

function recordHistory(overview) {
  const now = new Date();
  history.labels.push(now.toLocaleTimeString());
  const trim = history.labels.length > kHistory;
  if (trim) history.labels.shift();
  for (const node of overview.nodes) {
    const series = history.nodes[node.node] ||
        (history.nodes[node.node] = { in: new Array(history.labels.length - 1).fill(null),
                                      out: new Array(history.labels.length - 1).fill(null),
                                      connections: new Array(history.labels.length - 1).fill(null) });
    const load = node.load;
    series.in.push(load ? load.messages_in_per_second : null);
    series.out.push(load ? load.messages_out_per_second : null);
    series.connections.push(load ? load.connections : null);
  }
  for (const series of Object.values(history.nodes)) {
    for (const key of ["in", "out", "connections"]) {
      while (series[key].length < history.labels.length) series[key].push(null);
      while (series[key].length > history.labels.length) series[key].shift();
    }
  }
  if (!charts) {
    charts = { in: makeChart(el("chart-in")), out: makeChart(el("chart-out")),
               connections: makeChart(el("chart-connections")) };
  }
  for (const key of ["in", "out", "connections"]) {
    const chart = charts[key];
    if (!chart) continue;
    chart.data.labels = history.labels;
    chart.data.datasets = Object.entries(history.nodes).map(([node, series], i) => ({
      label: "node " + node, data: series[key], borderColor: kColors[i % kColors.length],
      backgroundColor: kColors[i % kColors.length], borderWidth: 1.5, spanGaps: false,
    }));
    chart.update("none");
  }
}

async function pollOverview() {
  try {
    const overview = await api("/api/overview");
    renderNodes(overview);
    recordHistory(overview);
    setStatus("updated " + new Date().toLocaleTimeString(), false);
  } catch (error) {
    if (!(error instanceof NeedsToken)) setStatus(error.message, true);
  }
}

// Listings: columns per list, and the query each sends.
const kColumns = {
  clients: (r) => [r.client_id, r.username, r.address, r.protocol, r.state, duration(r.connected_for_ms), r.shard],
  sessions: (r) => [r.client_id, r.connected, r.durable, r.expiry_interval_s, r.subscriptions, r.queued_messages,
                    bytes(r.queued_bytes), r.shard],
  subscriptions: (r) => [r.filter, r.client_id, r.qos, r.no_local, r.connected],
  retained: (r) => [r.topic, r.payload_bytes, r.qos, r.from_client],
  shared: (r) => [r.group, r.filter, r.member_count, r.connected, (r.members || []).join(", ")],
};

function listState(name) {
  return lists[name] || (lists[name] = { offset: 0, params: {} });
}

function kickButton(clientId) {
  const button = document.createElement("button");
  button.className = "kick";
  button.textContent = "Disconnect";
  button.dataset.clientId = clientId;
  let armed = null;
  button.addEventListener("click", async () => {
    if (!armed) {  // the first click arms it for three seconds
      button.textContent = "Really disconnect?";
      button.classList.add("confirm");
      armed = setTimeout(() => { armed = null; button.textContent = "Disconnect"; button.classList.remove("confirm"); },
                         3000);
      return;
    }
    clearTimeout(armed);
    armed = null;
    try {
      const answer = await api("/api/clients/" + encodeURIComponent(clientId), { method: "DELETE" });
      setStatus("disconnected " + answer.disconnected, false);
    } catch (error) {
      if (!(error instanceof NeedsToken)) setStatus(error.message, true);
    }
    loadList("clients");
  });
  return button;
}

async function loadList(name) {
  if (name === "partitions") return loadPartitions();
  const state = listState(name);
  const query = new URLSearchParams(state.params);
  query.set("limit", kPageSize);
  query.set("offset", state.offset);
  const path = name === "shared" ? "/api/shared" : "/api/" + name;
  let answer;
  try {
    answer = await api(path + "?" + query.toString());
  } catch (error) {
    if (!(error instanceof NeedsToken)) setStatus(error.message, true);
    return;
  }
  const rows = answer[name === "shared" ? "groups" : name] || [];
  const body = el(name).tBodies[0];
  body.replaceChildren();
  for (const item of rows) {
    const row = document.createElement("tr");
    if (item.client_id !== undefined) row.dataset.clientId = item.client_id;
    for (const value of kColumns[name](item)) cell(row, value);
    if (name === "clients") row.appendChild(document.createElement("td")).appendChild(kickButton(item.client_id));
    body.appendChild(row);
  }
  renderPager(name, answer.total, rows.length);
}

function renderPager(name, total, shown) {
  const state = listState(name);
  const pager = document.querySelector('.pager[data-list="' + name + '"]');
  pager.replaceChildren();
  const info = document.createElement("span");
  info.className = "muted";
  info.textContent = shown === 0 ? "none (" + total + " in all)"
                                 : (state.offset + 1) + "-" + (state.offset + shown) + " of " + total;
  const previous = document.createElement("button");
  previous.textContent = "Previous";
  previous.disabled = state.offset === 0;
  previous.onclick = () => { state.offset = Math.max(0, state.offset - kPageSize); loadList(name); };
  const next = document.createElement("button");
  next.textContent = "Next";
  next.disabled = state.offset + shown >= total;
  next.onclick = () => { state.offset += kPageSize; loadList(name); };
  pager.append(previous, next, info);
}

async function loadPartitions() {
  let status;
  try {
    status = await api("/api/cluster/partitions");
  } catch (error) {
    if (!(error instanceof NeedsToken)) setStatus(error.message, true);
    return;
  }
  const wanted = text(listState("partitions").params.partition).trim();
  const body = el("partitions").tBodies[0];
  body.replaceChildren();
  let shown = 0;
  for (const entry of status.open || []) {
    if (wanted !== "" && String(entry.partition) !== wanted) continue;
    if (++shown > 500) break;
    const row = document.createElement("tr");
    const lag = entry.lag ? Object.entries(entry.lag).map(([n, e]) => n + ":" + e).join(" ") : "";
    for (const value of [entry.partition, entry.leader, (entry.placed || []).join(","),
                         (entry.voters || []).join(","), entry.role || "-", entry.term, entry.commit, lag]) {
      cell(row, value);
    }
    body.appendChild(row);
  }
  el("partitions-note").textContent = (status.open || []).length + " of " + status.partitions +
      " partitions open, as node " + status.node + " sees them (at most 500 rows shown; lag where it leads)";
}

function selectTab(name) {
  activeTab = name;
  for (const button of document.querySelectorAll("#tabs button")) {
    button.classList.toggle("active", button.dataset.tab === name);
  }
  for (const section of document.querySelectorAll(".tab")) section.hidden = section.id !== "tab-" + name;
  loadList(name);
}

function start() {
  el("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    token = el("token").value.trim();
    sessionStorage.setItem(kTokenKey, token);
    el("token-form").hidden = true;
    el("main").hidden = false;
    el("forget-token").hidden = false;
    pollOverview();
    loadList(activeTab);
  });
  el("forget-token").hidden = !token;
  el("forget-token").addEventListener("click", () => {
    sessionStorage.removeItem(kTokenKey);
    token = "";
    location.reload();
  });
  for (const button of document.querySelectorAll("#tabs button")) {
    button.addEventListener("click", () => selectTab(button.dataset.tab));
  }
  for (const form of document.querySelectorAll("form.filters")) {
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const state = listState(form.dataset.list);
      state.offset = 0;
      state.params = {};
      for (const input of form.querySelectorAll("input")) {
        if (input.value.trim() !== "") state.params[input.name] = input.value.trim();
      }
      loadList(form.dataset.list);
    });
  }
  pollOverview();
  setInterval(pollOverview, kPollMs);
  setInterval(() => { if (activeTab === "clients") loadList("clients"); }, 5 * kPollMs);
  selectTab(activeTab);
}

start();
