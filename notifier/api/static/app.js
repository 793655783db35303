// The status page: plain JavaScript, no build step, nothing fetched but this service's API.
// Pages: groups (notifierIndex), one group (notifierGroup), incidents (notifierIncidents),
// one incident (notifierIncident), silences (notifierSilences).
"use strict";

const REFRESH_MS = 5000;
const CHART_REFRESH_MS = 30000;
const SVG = "http://www.w3.org/2000/svg";

// ---------------------------------------------------------------------------------------------
// Building blocks

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "text") node.textContent = value;
    else if (value !== null && value !== undefined) node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

function badge(status, extra = "") {
  return el("span", { class: `badge ${status} ${extra}`.trim(), text: status });
}

function humanSeconds(s) {
  if (s === null || s === undefined) return "—";
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

function humanNumber(n) {
  if (n === null || n === undefined) return "—";
  return n.toLocaleString("en-US");
}

function shortNumber(n) {
  const abs = Math.abs(n);
  if (abs >= 1e9) return `${(n / 1e9).toFixed(abs >= 1e10 ? 0 : 1)} G`;
  if (abs >= 1e6) return `${(n / 1e6).toFixed(abs >= 1e7 ? 0 : 1)} M`;
  if (abs >= 1e4) return `${(n / 1e3).toFixed(0)} k`;
  return String(Math.round(n));
}

// ---------------------------------------------------------------------------------------------
// Times: every time on the page is shown in one zone, always labelled with it. UTC by default
// (what logs and notifications use); the header's selector switches to the browser's zone.

function zoneIsLocal() {
  return localStorage.getItem("notifier.zone") === "local";
}

function zoneName(ms) {
  if (!zoneIsLocal()) return "UTC";
  const parts = new Intl.DateTimeFormat("en-US", { timeZoneName: "short" }).formatToParts(new Date(ms));
  return (parts.find((p) => p.type === "timeZoneName") || { value: "local" }).value;
}

function timeParts(ms) {
  const options = { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" };
  if (!zoneIsLocal()) options.timeZone = "UTC";
  return new Intl.DateTimeFormat("en-GB", options).format(new Date(ms));
}

function dayOf(ms) {
  const options = { month: "short", day: "numeric" };
  if (!zoneIsLocal()) options.timeZone = "UTC";
  return new Intl.DateTimeFormat("en-US", options).format(new Date(ms));
}

// "02:14:05 UTC", or "Nov 21 02:14:05 UTC" when not today.
function fmtTime(ms) {
  if (ms === null || ms === undefined) return "—";
  const day = dayOf(ms) === dayOf(Date.now()) ? "" : `${dayOf(ms)} `;
  return `${day}${timeParts(ms)} ${zoneName(ms)}`;
}

function fmtClock(ms) {
  return timeParts(ms).slice(0, 5);
}

function zoneSelector() {
  const select = el("select", { id: "zone", "aria-label": "time zone" },
    el("option", { value: "utc", text: "times in UTC" }),
    el("option", { value: "local", text: `times in local time (${zoneName(Date.now()) === "UTC" ? "UTC" : Intl.DateTimeFormat().resolvedOptions().timeZone})` }));
  select.value = zoneIsLocal() ? "local" : "utc";
  select.addEventListener("change", () => {
    localStorage.setItem("notifier.zone", select.value);
    location.reload();
  });
  return select;
}

// The navigation every page starts with.
function pageHeader(active) {
  const nav = el("nav", { class: "nav" },
    el("a", { href: "/", class: active === "groups" ? "active" : "", text: "Groups" }),
    el("a", { href: "/incidents", class: active === "incidents" ? "active" : "", text: "Incidents" }),
    el("a", { href: "/silences", class: active === "silences" ? "active" : "", text: "Silences" }),
    el("span", { class: "spacer" }),
    el("span", { id: "updated", class: "muted" }),
    zoneSelector());
  document.body.prepend(nav);
}

function updated() {
  document.getElementById("updated").textContent = `updated ${fmtTime(Date.now())}`;
}

async function getJson(path) {
  const response = await fetch(path);
  if (!response.ok) {
    const error = new Error(`${path}: HTTP ${response.status}`);
    error.status = response.status;
    try { error.body = await response.json(); } catch (_) { error.body = null; }
    throw error;
  }
  return response.json();
}

function groupHref(cluster, group) {
  return `/groups/${encodeURIComponent(cluster)}/${encodeURIComponent(group)}`;
}

function incidentHref(id) {
  return `/incidents/${encodeURIComponent(id)}`;
}

const RANK = { ERR: 3, WARN: 2, OK: 1, NOTFOUND: 0 };
const WORD_RANK = { STOP: 3, STALL: 3, REWIND: 3, ERR: 2, WARN: 1 };

// Evidence as key → values, one line each; times (keys naming a timestamp) with their zone.
function evidenceTable(evidence) {
  const rows = Object.entries(evidence || {}).map(([key, value]) => {
    const isTime = /timestamp|^ts$|last_true|_since$|_at$/.test(key);
    const isStamp = (v) => isTime && typeof v === "number" && v > 1e11;
    const show = (v) => (v === null ? "·" : isStamp(v) ? fmtTime(v)
      : typeof v === "number" && !Number.isInteger(v) ? String(Number(v.toPrecision(4))) : String(v));
    // A list of times: the zone once, at the end.
    const stamps = Array.isArray(value) && value.some(isStamp);
    const text = stamps ? `${value.map((v) => (isStamp(v) ? timeParts(v) : show(v))).join("  ")}  (${zoneName(value.find(isStamp))})`
      : Array.isArray(value) ? value.map(show).join("  ")
        : typeof value === "object" && value !== null ? JSON.stringify(value) : show(value);
    return el("tr", {}, el("th", { text: key }), el("td", { text }));
  });
  return el("table", { class: "evidence" }, el("tbody", {}, ...rows));
}

function findingBlock(f, open) {
  return el("div", { class: `finding ${f.severity}`, "data-rule": f.rule },
    el("div", {}, badge(f.status), " ", el("strong", { text: f.rule }),
      f.topic !== null && f.topic !== undefined ? ` on ${f.topic}/${f.partition}` : "",
      f.owned_by ? el("span", { class: "owner", text: ` (owned by ${f.owned_by})` }) : null, " — ", f.message,
      f.since ? el("span", { class: "muted", text: ` (since ${fmtTime(f.since)})` }) : null),
    el("details", open ? { open: "" } : {}, el("summary", { text: "evidence" }), evidenceTable(f.evidence)));
}

// An incident as a chip: a link with its status, when it opened, how long ago, and what its
// notifications did (filled in by deliveryMark once /api/incidents has answered).
function incidentChip(incident, delivery) {
  const chip = el("a", { class: `chip incident ${incident.status}`, href: incidentHref(incident.id),
    "data-incident": incident.id, title: `incident ${incident.id}` },
  `${incident.peak_status === "ERR" || incident.status === "ERR" ? "ERR" : incident.status} incident · since ${fmtTime(incident.opened_at)} · ${humanSeconds(incident.duration_seconds)}`);
  if (delivery) chip.append(" · ", deliveryMark(delivery));
  if (incident.silenced) chip.append(" · silenced");
  return chip;
}

const DELIVERY_WORDS = { delivered: "✓ delivered", pending: "… pending", failed: "✗ failed", "not sent": "not sent" };

function deliveryMark(state) {
  return el("span", { class: `delivery ${state.replace(" ", "-")}`, "data-delivery": state, text: DELIVERY_WORDS[state] || state });
}

function channelChips(channels) {
  return el("span", { class: "channels" }, ...channels.map((c) => el("span", {
    class: `chip channel ${c.state}`, "data-channel": c.channel, "data-state": c.state,
    title: c.last_error ? `last error: ${c.last_error}` : `${c.delivered} delivered, ${c.pending} pending, ${c.failed} failed`,
  }, `${c.channel}: `, deliveryMark(c.state))));
}

// ---------------------------------------------------------------------------------------------
// Clusters that cannot be scanned: the first thing on every page that lists groups.

function clusterBanners(clusters, incidents) {
  const box = document.getElementById("cluster-alerts");
  const banners = [];
  for (const c of clusters) {
    const downIncident = (incidents || []).find((i) => i.cluster === c.cluster && i.group === "*" && i.closed_at === null);
    if (c.down) {
      const since = downIncident ? ` since ${fmtTime(downIncident.opened_at)}` : "";
      const last = c.last_scan === null ? "It has never been scanned successfully: none of its groups are known."
        : `Last successful scan ${fmtTime(c.last_scan)} (${humanSeconds(c.data_age_seconds)} ago); its groups below show that data.`;
      banners.push(el("div", { class: "banner down", role: "alert", "data-cluster": c.cluster },
        el("div", { class: "banner-title" }, badge("ERR"), ` Cluster ${c.cluster} is DOWN${since}`),
        el("div", { class: "banner-reason" }, "Reason: ", el("code", { text: c.last_error || "scans fail (no error recorded)" })),
        el("div", {}, `${c.consecutive_failures} scans in a row failed. ${last} Alerts for its groups are muted; one cluster alert is raised instead.`),
        downIncident ? el("div", {}, incidentChip({ ...downIncident, duration_seconds: downIncident.duration_seconds }, downIncident.delivery)) : null));
    } else if (c.stale) {
      const text = c.last_scan === null ? `${c.cluster}: not scanned yet`
        : `${c.cluster}: data ${humanSeconds(c.data_age_seconds)} old (last scan ${fmtTime(c.last_scan)})`;
      banners.push(el("div", { class: "banner stale", "data-cluster": c.cluster }, `stale — ${text}`));
    }
  }
  box.replaceChildren(...banners);
  return banners.length;
}

// ---------------------------------------------------------------------------------------------
// Sparklines: each row drawn over its own range, which is written beside it, and never less
// than a range of 100 records or a tenth of the row's largest value, so a healthy group
// wobbling between 0 and 7 draws a flat line while a group climbing from 400 to 460 visibly
// climbs. The trend over the window is spelled out too.

function sparkRange(values) {
  const lo = Math.min(...values), hi = Math.max(...values);
  return [lo, lo + Math.max(hi - lo, 100, 0.1 * hi)];
}

function sparkline(values, status) {
  const node = svg("svg", { class: `spark ${status}`, viewBox: "0 0 120 24", role: "img" });
  if (!values || values.length < 2) return node;
  const [lo, top] = sparkRange(values);
  const y = (v) => (22 - ((v - lo) / (top - lo)) * 20).toFixed(1);
  const step = 120 / (values.length - 1);
  node.append(svg("polyline", { points: values.map((v, i) => `${(i * step).toFixed(1)},${y(v)}`).join(" ") }));
  node.append(svg("circle", { cx: "120", cy: y(values[values.length - 1]), r: "2" }));
  node.append(svg("title", { text: values.map(humanNumber).join(" → ") }));
  return node;
}

function sparkLabel(values) {
  if (!values || values.length < 2) return "";
  const lo = Math.min(...values), hi = Math.max(...values);
  return lo === hi ? shortNumber(hi) : `${shortNumber(lo)}–${shortNumber(hi)}`;
}

function trend(values) {
  if (!values || values.length < 2) return { arrow: "", text: "", dir: "none" };
  const first = values[0], last = values[values.length - 1];
  const change = last - first;
  const relative = Math.abs(change) / Math.max(first, last, 1);
  if (Math.abs(change) <= 2 || relative < 0.05) return { arrow: "→", text: "steady", dir: "steady" };
  const sign = change > 0 ? "+" : "−";
  return { arrow: change > 0 ? "↑" : "↓", text: `${sign}${shortNumber(Math.abs(change))}`, dir: change > 0 ? "rising" : "falling" };
}

// ---------------------------------------------------------------------------------------------
// The groups page

// Why a group's status (its open incident's: what the pager said) is not what the last
// evaluation says, or why it is kept: beside the status badge, the evaluation's own and the
// reason (hold, recovering, keep_firing_for, an earlier scan).
function statusReason(evaluated, reason) {
  if (!reason) return [];
  const parts = [" "];
  if (evaluated) parts.push(el("span", { class: "evaluated", "data-evaluated": evaluated }, "evaluated ", badge(evaluated, "small")));
  parts.push(el("div", { class: "muted small status-reason", "data-reason": reason.kind, text: `${reason.kind}: ${reason.message}` }));
  return parts;
}

function notifierIndex() {
  pageHeader("groups");
  const state = { groups: [], clusters: [], incidents: {}, sortKey: "status", sortDesc: true };
  const body = document.querySelector("#groups tbody");
  const filter = document.getElementById("filter");
  const onlyProblems = document.getElementById("only-problems");
  const params = new URLSearchParams(location.search);
  if (params.get("q")) filter.value = params.get("q");

  function word(g) {
    return g.finding ? g.finding.status : g.status;
  }

  function compare(a, b) {
    const key = state.sortKey;
    let x = a[key], y = b[key];
    if (key === "status") {
      x = RANK[a.status] * 10 + (WORD_RANK[word(a)] || 0);
      y = RANK[b.status] * 10 + (WORD_RANK[word(b)] || 0);
      if (x === y) { x = a.max_lag_seconds ?? a.total_lag; y = b.max_lag_seconds ?? b.total_lag; }
    }
    if (x === null || x === undefined) x = -Infinity;
    if (y === null || y === undefined) y = -Infinity;
    const order = x < y ? -1 : x > y ? 1 : b.group.localeCompare(a.group);
    return state.sortDesc ? -order : order;
  }

  function why(g) {
    const cell = el("td", { class: "why" });
    if (g.finding) {
      cell.append(el("span", { class: "sentence", text: g.finding.message }));
      const where = g.finding.topic !== null ? ` on ${g.finding.topic}/${g.finding.partition}` : "";
      const more = g.finding.others ? ` (+${g.finding.others} more)` : "";
      cell.append(el("div", { class: "muted small", text: `${g.finding.rule}${where}${more}` }));
    } else if (g.status !== "OK") {
      cell.append(el("span", { class: "muted", text: g.rules.join(", ") }));
    }
    return cell;
  }

  function render() {
    const q = filter.value.trim().toLowerCase();
    const rows = state.groups
      .filter((g) => !onlyProblems.checked || g.status === "WARN" || g.status === "ERR")
      .filter((g) => !q || [g.cluster, g.group, g.status, word(g), ...g.rules].join(" ").toLowerCase().includes(q))
      .sort(compare);
    body.replaceChildren(...rows.map((g) => {
      const link = el("a", { href: groupHref(g.cluster, g.group), text: g.group });
      const marks = el("td", { class: "marks" });
      if (g.incident) marks.append(incidentChip(g.incident, (state.incidents[g.incident.id] || {}).delivery));
      if (g.silenced) {
        const until = g.silenced_until ? ` until ${fmtTime(g.silenced_until)}` : "";
        marks.append(el("a", { class: "mark silenced", href: "/silences", "data-silenced": "", text: `silenced${until}` }));
      }
      if (g.partial) marks.append(el("span", { class: "mark partial", title: "part of the window is missing: rules do not notify from it yet", text: "partial" }));
      if (g.stale) marks.append(el("span", { class: "mark stale", text: `stale: ${humanSeconds(g.data_age_seconds)} old` }));
      const t = trend(g.lag_history);
      const statusCell = el("td", { class: "status" }, badge(g.status));
      if (g.finding && g.finding.status !== g.status) statusCell.append(" ", badge(g.finding.status, "word"));
      statusCell.append(...statusReason(g.evaluated_status !== g.status ? g.evaluated_status : null, g.status_reason));
      return el("tr", { class: `status-${g.status}`, "data-group": g.group, "data-status": g.status, "data-word": word(g) },
        statusCell,
        el("td", { text: g.cluster }),
        el("td", {}, link),
        why(g),
        el("td", { class: "num" }, humanNumber(g.total_lag), " ", el("span", { class: `trend ${t.dir}`, "data-trend": t.dir, title: `change over the window: ${t.text}`, text: `${t.arrow} ${t.text}` })),
        el("td", { class: "num", text: humanSeconds(g.max_lag_seconds) }),
        el("td", { class: "spark-cell" }, sparkline(g.lag_history, g.status), el("span", { class: "spark-range", text: sparkLabel(g.lag_history) })),
        el("td", { class: "num", text: g.partitions }),
        el("td", { class: "num", title: "share of partitions whose window is unbroken", text: `${Math.round(g.complete * 100)}%` }),
        marks);
    }));
    const downClusters = state.clusters.filter((c) => c.down);
    const empty = document.getElementById("empty");
    empty.hidden = state.groups.length > 0;
    empty.textContent = downClusters.length === state.clusters.length && state.clusters.length
      ? "No groups to show: every cluster is down (see above)."
      : downClusters.length ? "No groups yet from the clusters that answer; the others are down (see above)."
        : "No groups yet: waiting for the first scan.";
    const counts = { OK: 0, WARN: 0, ERR: 0 };
    for (const g of state.groups) counts[g.status] = (counts[g.status] || 0) + 1;
    document.getElementById("summary").replaceChildren(
      el("span", { class: counts.ERR ? "count ERR" : "count", text: `${counts.ERR} ERR` }),
      el("span", { class: counts.WARN ? "count WARN" : "count", text: `${counts.WARN} WARN` }),
      el("span", { class: "count", text: `${counts.OK} OK` }),
      el("span", { class: "muted", text: `${state.groups.length} groups` }),
      downClusters.length ? el("span", { class: "count ERR", text: `${downClusters.length} cluster${downClusters.length > 1 ? "s" : ""} down` }) : "");
    for (const th of document.querySelectorAll("th[data-key]")) {
      th.classList.toggle("sorted-desc", th.dataset.key === state.sortKey && state.sortDesc);
      th.classList.toggle("sorted-asc", th.dataset.key === state.sortKey && !state.sortDesc);
    }
  }

  async function refresh() {
    try {
      const [data, incidents] = await Promise.all([
        getJson("/api/groups"), getJson("/api/incidents?open_only=true").catch(() => ({ incidents: [] }))]);
      state.groups = data.groups;
      state.clusters = data.clusters;
      state.incidents = Object.fromEntries(incidents.incidents.map((i) => [i.id, i]));
      clusterBanners(data.clusters, incidents.incidents);
      updated();
      render();
    } catch (error) {
      document.getElementById("updated").textContent = `refresh failed: ${error.message}`;
    }
  }

  for (const th of document.querySelectorAll("th[data-key]")) {
    th.addEventListener("click", () => {
      if (state.sortKey === th.dataset.key) state.sortDesc = !state.sortDesc;
      else { state.sortKey = th.dataset.key; state.sortDesc = true; }
      render();
    });
  }
  filter.addEventListener("input", render);
  onlyProblems.addEventListener("change", render);
  refresh();
  setInterval(refresh, REFRESH_MS);
}

// ---------------------------------------------------------------------------------------------
// Charts: inline SVG, time on x (labelled with its zone), value on y from 0; incidents shaded,
// thresholds dashed and named, gaps in the history left as gaps.

function chart({ metric, title, series, thresholds, spans, start, end, gapMs, format }) {
  const width = Math.max(480, Math.min(1400, (document.getElementById("charts").clientWidth || 900) - 20));
  const height = 230, left = 64, right = 200, top = 22, bottom = 28;
  const plotW = width - left - right, plotH = height - top - bottom;
  let max = 1;
  for (const s of series) for (const p of s.points) if (p.v !== null && p.v > max) max = p.v;
  for (const t of thresholds) if (t.value > max) max = t.value;
  max *= 1.08;
  const x = (t) => left + ((t - start) / (end - start)) * plotW;
  const y = (v) => top + plotH - (v / max) * plotH;
  const node = svg("svg", { class: "chart", "data-metric": metric, width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title });
  node.append(svg("text", { x: left, y: 14, class: "chart-title", text: title }));
  // incidents first, under everything
  for (const s of spans) {
    const x0 = Math.max(left, x(s.opened_at)), x1 = Math.min(left + plotW, x(s.closed_at ?? end));
    if (x1 <= left || x0 >= left + plotW) continue;
    const rect = svg("rect", { class: `incident ${s.cluster_down ? "cluster-down" : s.peak_status}`, x: x0, y: top, width: Math.max(2, x1 - x0), height: plotH, "data-incident": s.id });
    rect.append(svg("title", { text: `${s.cluster_down ? "cluster down" : `incident (${s.peak_status})`} ${fmtTime(s.opened_at)} – ${s.closed_at ? fmtTime(s.closed_at) : "open"}` }));
    node.append(rect, svg("text", { x: x0 + 3, y: top + 11, class: "incident-label", text: s.cluster_down ? "cluster down" : `incident ${s.peak_status}${s.closed_at ? "" : " (open)"}` }));
  }
  // axes and grid
  for (let i = 0; i <= 4; i++) {
    const v = (max / 1.08) * (i / 4);
    node.append(svg("line", { class: "grid", x1: left, x2: left + plotW, y1: y(v), y2: y(v) }),
      svg("text", { class: "tick", x: left - 6, y: y(v) + 4, "text-anchor": "end", text: format(v) }));
  }
  const spanMs = end - start;
  const stepMs = [5, 10, 15, 30, 60, 120, 180, 360, 720].map((m) => m * 60000).find((s) => spanMs / s <= 8) || 1440 * 60000;
  for (let t = Math.ceil(start / stepMs) * stepMs; t <= end; t += stepMs) {
    node.append(svg("line", { class: "grid", x1: x(t), x2: x(t), y1: top, y2: top + plotH }));
    // the zone's name sits at the right end of the axis: a time under it would be unreadable
    if (x(t) < left + plotW - 45) node.append(svg("text", { class: "tick", x: x(t), y: height - 10, "text-anchor": "middle", text: fmtClock(t) }));
  }
  node.append(svg("text", { class: "tick zone", x: left + plotW, y: height - 10, "text-anchor": "end", text: zoneName(end) }));
  // the series, broken where scans are missing
  for (const s of series) {
    let run = [];
    const flush = () => {
      if (run.length === 1) node.append(svg("circle", { class: `point ${s.cls}`, cx: run[0][0], cy: run[0][1], r: 1.8 }));
      else if (run.length > 1) node.append(svg("polyline", { class: `line ${s.cls}`, "data-series": s.cls, points: run.map((p) => p.join(",")).join(" ") }));
      run = [];
    };
    let previous = null;
    for (const p of s.points) {
      if (p.v === null) { flush(); previous = null; continue; }
      if (previous !== null && p.t - previous > gapMs) flush();
      run.push([x(p.t).toFixed(1), y(p.v).toFixed(1)]);
      previous = p.t;
    }
    flush();
  }
  // thresholds on top, named at the right edge
  let labelY = -Infinity;
  for (const t of [...thresholds].sort((a, b) => b.value - a.value)) {
    const yy = y(t.value);
    node.append(svg("line", { class: `threshold ${t.severity}`, "data-rule": t.rule, x1: left, x2: left + plotW, y1: yy, y2: yy }));
    const ly = Math.max(yy + 4, labelY + 12);
    labelY = ly;
    node.append(svg("text", { class: `threshold-label ${t.severity}`, x: left + plotW + 6, y: ly, text: `${t.rule} ${format(t.value)}${t.scope === "partition" && t.metric === "lag" ? " /partition" : ""}` }));
    if (t.clear_below !== null && t.clear_below !== t.value) {
      node.append(svg("line", { class: "threshold clear", "data-rule": t.rule, x1: left, x2: left + plotW, y1: y(t.clear_below), y2: y(t.clear_below) }));
    }
  }
  // legend
  let lx = left + title.length * 7 + 24;
  for (const s of series) {
    node.append(svg("line", { class: `line ${s.cls}`, x1: lx, x2: lx + 18, y1: 10, y2: 10 }), svg("text", { class: "legend", x: lx + 22, y: 14, text: s.name }));
    lx += 34 + s.name.length * 6.2;
  }
  return node;
}

function durationTick(s) {
  if (s < 1) return "0";
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

function drawCharts(h) {
  const box = document.getElementById("charts");
  if (!h.history_enabled) {
    box.replaceChildren(el("p", { class: "muted", text: "The service keeps no history (history.enabled: false): there is nothing to chart before the window." }));
    return;
  }
  const at = (key) => h.points.map((p) => ({ t: p.ts, v: p[key] }));
  const lagLines = h.thresholds.filter((t) => t.metric === "lag");
  const lagSeries = [{ name: "total lag (records)", cls: "total", points: at("total_lag") }];
  if (lagLines.some((t) => t.scope === "partition")) lagSeries.push({ name: "largest partition", cls: "largest", points: at("max_partition_lag") });
  const common = { spans: h.incidents, start: h.start, end: h.end, gapMs: h.gap_ms };
  const note = h.scans === 0 ? el("p", { class: "muted", text: `No scans of this group in the history for the last ${humanSeconds(h.hours * 3600)}.` })
    : el("p", { class: "muted small", text: `${h.scans} scans from ${fmtTime(h.start)} to ${fmtTime(h.end)}${h.bucket_seconds ? `; each point is the worst of ${humanSeconds(h.bucket_seconds)}` : ""}. Shaded: incidents. Dashed: the thresholds that apply now (lighter: where a firing rule clears).` });
  box.replaceChildren(
    chart({ ...common, metric: "lag_seconds", title: "lag in seconds (furthest-behind partition)", series: [{ name: "seconds behind", cls: "seconds", points: at("max_lag_seconds") }], thresholds: h.thresholds.filter((t) => t.metric === "lag_seconds"), format: durationTick }),
    chart({ ...common, metric: "lag", title: "lag in records", series: lagSeries, thresholds: lagLines, format: shortNumber }),
    note);
  const list = document.getElementById("group-incidents");
  const incidents = h.incidents.filter((i) => !i.cluster_down).reverse();
  list.replaceChildren(...(incidents.length ? incidents.map((i) => el("li", {},
    el("a", { href: incidentHref(i.id), text: `${i.peak_status} incident` }),
    ` opened ${fmtTime(i.opened_at)}, ${i.closed_at ? `closed ${fmtTime(i.closed_at)} (${i.close_reason || "closed"}) after ${humanSeconds((i.closed_at - i.opened_at) / 1000)}` : "still open"}${i.silenced ? " · silenced" : ""}`))
    : [el("li", { class: "muted", text: `No incidents in the last ${humanSeconds(h.hours * 3600)}.` })]));
}

// ---------------------------------------------------------------------------------------------
// One group

function notifierGroup() {
  pageHeader("groups");
  const parts = location.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  const [cluster, group] = [parts[1], parts.slice(2).join("/")];
  document.getElementById("title").textContent = `${cluster} / ${group}`;
  document.title = `notifier — ${group}`;
  const hoursSelect = document.getElementById("hours");
  // By default the span the group's history covers: a group watched for minutes fills the
  // chart instead of being a sliver at the right edge of six hours.
  hoursSelect.value = new URLSearchParams(location.search).get("hours") || "";
  const silence = document.getElementById("silence-group");
  silence.href = `/silences?${new URLSearchParams({ matchers: `cluster="${cluster}"\ngroup="${group}"` })}`;

  function card(label, value, help, attrs = {}) {
    return el("div", { class: "card", ...attrs }, el("div", { class: "label", text: label }),
      el("div", { class: "value" }, value), help ? el("div", { class: "help", text: help }) : null);
  }

  function render(g, incident) {
    const word = g.findings.length ? leadingWord(g.findings) : g.status;
    // The status shown first is the open incident's (what the pager said), the evaluation's
    // beside it when they differ, with the reason.
    const shown = g.incident ? g.incident.status : g.status;
    document.getElementById("badge").replaceChildren(badge(shown), ...(word !== shown && WORD_RANK[word] === 3 ? [" ", badge(word, "word")] : []),
      ...statusReason(shown !== g.status ? g.status : null, g.status_reason));
    const gate = g.minimum_complete === null ? "" : ` Rules notify only from windows at least ${Math.round(g.minimum_complete * 100)}% complete.`;
    const cards = [
      card("total lag", humanNumber(g.total_lag), "records not yet read, all partitions"),
      card("behind", humanSeconds(g.max_lag_seconds), "how far behind in time the furthest partition is"),
      card("window complete", `${Math.round(g.complete * 100)}%${g.partial ? " (partial)" : ""}`,
        `share of partitions whose last ${g.intervals} scans are unbroken.${gate}`),
      card("Burrow complete", `${Math.round(g.burrow_complete * 100)}%`,
        `Burrow's figure: share of partitions whose ring of ${g.intervals} commits is full (what /v3 reports)`),
      card("group state", `${g.group_state}, ${g.members} members`),
    ];
    if (g.incident) cards.push(card("incident", incidentChip(g.incident, incident ? incident.delivery : null), null, { "data-card": "incident" }));
    else cards.push(card("incident", "none"));
    if (g.silenced) cards.push(card("silenced", g.silenced_until ? `until ${fmtTime(g.silenced_until)}` : "yes", "alerts are held back", { class: "card silenced" }));
    cards.push(card("data age", `${humanSeconds(g.data_age_seconds)}${g.stale ? " — stale" : ""}`, g.last_scan ? `last scan ${fmtTime(g.last_scan)}` : null));
    document.getElementById("overview").replaceChildren(...cards);
    document.getElementById("overview").classList.toggle("stale", g.stale);
    const findings = document.getElementById("findings");
    const worstFirst = [...g.findings].sort((a, b) => (b.severity === "err") - (a.severity === "err") || (WORD_RANK[b.status] || 0) - (WORD_RANK[a.status] || 0));
    findings.replaceChildren(...(g.findings.length ? worstFirst.map((f) => findingBlock(f, true)) :
      [el("p", { class: "muted", text: "Nothing is firing." })]));
    const body = document.querySelector("#partitions tbody");
    body.replaceChildren(...g.partitions.map((p) => el("tr", { class: `status-${p.status === "OK" ? "OK" : p.status === "WARN" ? "WARN" : "ERR"}` },
      el("td", { text: `${p.topic}/${p.partition}` }, ...(p.leo_reset ? [" ", el("span", {
        class: "mark", "data-leo-reset": "",
        title: `log-end offset went from ${humanNumber(p.leo_reset.previous_log_end_offset)} back to ${humanNumber(p.leo_reset.log_end_offset)}: lag in seconds started over`,
        text: `log restarted ${fmtTime(p.leo_reset.at)}` })] : [])),
      el("td", p.owned_by ? { class: "owner", text: p.owned_by } : { class: "muted", text: "no member" }),
      el("td", {}, badge(p.status)),
      el("td", { class: "num", text: humanNumber(p.current_lag) }),
      el("td", { class: "num", text: humanSeconds(p.lag_seconds) }),
      el("td", { class: "num", text: humanNumber(p.committed_offset) }),
      el("td", { class: "num", text: humanNumber(p.log_end_offset) }),
      el("td", { class: "num", text: humanNumber(p.log_start_offset) }),
      el("td", { class: "num", text: `${Math.round(p.complete * 100)}%` }),
      el("td", {}, sparkline((p.window || []).map((s) => s.lag || 0), p.status), " ", el("span", { class: "muted", text: (p.window || []).map((s) => s.lag ?? "·").join(" ") })))));
    updated();
  }

  async function refresh() {
    const path = `/api/groups/${encodeURIComponent(cluster)}/${encodeURIComponent(group)}`;
    try {
      const g = await getJson(path);
      render(g, null);
      if (g.incident) {
        const detail = await getJson(`/api/incidents/${encodeURIComponent(g.incident.id)}`).catch(() => null);
        if (detail) render(g, detail.incident);
      }
    } catch (error) {
      if (error.status === 404) document.getElementById("badge").replaceChildren(badge("NOTFOUND"));
      else document.getElementById("updated").textContent = `refresh failed: ${error.message}`;
    }
  }

  async function refreshCharts() {
    const path = `/api/groups/${encodeURIComponent(cluster)}/${encodeURIComponent(group)}/history${hoursSelect.value ? `?hours=${hoursSelect.value}` : ""}`;
    try {
      drawCharts(await getJson(path));
    } catch (error) {
      document.getElementById("charts").replaceChildren(el("p", { class: "muted", text: `history unavailable: ${error.message}` }));
    }
  }

  hoursSelect.addEventListener("change", () => {
    history.replaceState(null, "", hoursSelect.value ? `?hours=${hoursSelect.value}` : location.pathname);
    refreshCharts();
  });
  refresh();
  refreshCharts();
  setInterval(refresh, REFRESH_MS);
  setInterval(refreshCharts, CHART_REFRESH_MS);
}

// The finding to read first: ERR before WARN, a named fault (STOP, STALL, REWIND) first.
function leadingFinding(findings) {
  let best = null;
  const weight = (f) => (f.severity === "err" ? 10 : 0) + (WORD_RANK[f.status] || 0);
  for (const f of findings || []) if (best === null || weight(f) > weight(best)) best = f;
  return best;
}

function leadingWord(findings) {
  return leadingFinding(findings).status;
}

// ---------------------------------------------------------------------------------------------
// Incidents

function notConfigured(box, error) {
  if (error.status === 404) {
    box.replaceChildren(el("p", { class: "muted", text: "Notifications are not configured (no notify: section): there are no incidents or silences." }));
    return true;
  }
  return false;
}

function notifierIncidents() {
  pageHeader("incidents");
  const body = document.querySelector("#incidents tbody");

  async function refresh() {
    try {
      const [data, groups] = await Promise.all([getJson("/api/incidents"), getJson("/api/groups")]);
      clusterBanners(groups.clusters, data.incidents);
      document.getElementById("none").hidden = data.incidents.length > 0;
      body.replaceChildren(...data.incidents.map((i) => {
        const open = i.closed_at === null;
        const where = i.group === "*" ? el("span", { text: `${i.cluster} (cluster down)` })
          : el("a", { href: groupHref(i.cluster, i.group), text: `${i.cluster} / ${i.group}` });
        const lead = leadingFinding(i.findings);
        return el("tr", { class: open ? `status-${i.status} open` : "closed", "data-incident": i.id },
          el("td", {}, badge(open ? i.status : "OK"), open ? "" : el("span", { class: "muted small", text: ` was ${i.peak_status}` })),
          el("td", {}, el("a", { href: incidentHref(i.id), text: open ? "open" : "closed" })),
          el("td", {}, where, lead ? el("div", { class: "muted small", text: `${lead.status}: ${lead.message}` }) : null),
          el("td", { text: fmtTime(i.opened_at) }),
          el("td", { class: "num", text: humanSeconds(i.duration_seconds) }),
          el("td", { text: open ? "" : `${fmtTime(i.closed_at)} — ${i.close_reason || ""}` }),
          el("td", {}, i.silenced ? el("span", { class: "mark silenced", text: "silenced" }) : "", deliveryMark(i.delivery), " ", channelChips(i.channels)));
      }));
      updated();
    } catch (error) {
      if (!notConfigured(document.getElementById("incidents-box"), error)) document.getElementById("updated").textContent = `refresh failed: ${error.message}`;
    }
  }
  refresh();
  setInterval(refresh, REFRESH_MS);
}

function notifierIncident() {
  pageHeader("incidents");
  const id = decodeURIComponent(location.pathname.split("/").filter(Boolean)[1]);

  function render(d) {
    const i = d.incident;
    const open = i.closed_at === null;
    document.getElementById("title").replaceChildren(
      i.group === "*" ? `${i.cluster}: cluster down` : el("a", { href: groupHref(i.cluster, i.group), text: `${i.cluster} / ${i.group}` }));
    document.getElementById("badge").replaceChildren(badge(open ? i.status : "OK"), " ", el("span", { class: "muted", text: open ? "open" : `closed, was ${i.peak_status}` }));
    const card = (label, value) => el("div", { class: "card" }, el("div", { class: "label", text: label }), el("div", { class: "value" }, value));
    document.getElementById("overview").replaceChildren(
      card("opened", fmtTime(i.opened_at)),
      card(open ? "open for" : "lasted", humanSeconds(i.duration_seconds)),
      card("closed", open ? "—" : `${fmtTime(i.closed_at)} (${i.close_reason || "closed"})`),
      card("peak", badge(i.peak_status)),
      card("notifications", deliveryMark(i.delivery)),
      card("silenced", i.silenced ? "yes: notifications held back" : "no"));
    document.getElementById("timeline").replaceChildren(...d.timeline.map((e) => el("li", { "data-event": e.event },
      el("span", { class: "when", text: fmtTime(e.at) }), " ", e.status ? badge(e.status) : "", " ", e.text)));
    document.getElementById("channels").replaceChildren(...(i.channels.length ? i.channels.map((c) => el("div", {
      class: `card channel ${c.state}`, "data-channel": c.channel, "data-state": c.state },
    el("div", { class: "label", text: `${c.channel} (receiver ${c.receiver})` }),
    el("div", { class: "value" }, deliveryMark(c.state)),
    el("div", { class: "help", text: `last: ${c.last_event} at ${fmtTime(c.last_at)} · ${c.delivered} delivered, ${c.pending} pending, ${c.failed} failed` }),
    c.last_error ? el("div", { class: "help error", text: `last error: ${c.last_error}` }) : null))
      : [el("p", { class: "muted", text: i.silenced ? "Nothing sent: the incident is silenced." : "Nothing sent yet." })]));
    document.querySelector("#deliveries tbody").replaceChildren(...d.deliveries.map((r) => el("tr", { "data-channel": r.channel, "data-state": r.state },
      el("td", { text: fmtTime(r.created_at) }),
      el("td", { text: r.channel }),
      el("td", {}, `${r.event} `, badge(r.status)),
      el("td", {}, deliveryMark(r.state)),
      el("td", { class: "num", text: r.attempts }),
      el("td", { text: r.state === "pending" ? (r.next_attempt_at ? `next try ${fmtTime(r.next_attempt_at)}` : "") : fmtTime(r.done_at) }),
      el("td", { class: "error", text: r.last_error || "" }))));
    document.getElementById("findings").replaceChildren(...(i.findings.length ? i.findings.map((f) => findingBlock(f, false)) : [el("p", { class: "muted", text: "No findings recorded." })]));
    updated();
  }

  async function refresh() {
    try {
      render(await getJson(`/api/incidents/${encodeURIComponent(id)}`));
    } catch (error) {
      if (error.status === 404) document.getElementById("title").textContent = (error.body && error.body.message) || "no such incident";
      else document.getElementById("updated").textContent = `refresh failed: ${error.message}`;
    }
  }
  refresh();
  setInterval(refresh, REFRESH_MS);
}

// ---------------------------------------------------------------------------------------------
// Silences: list, create, expire. Writes carry the API token when the person gave one (kept for
// this browser tab only); a 401 asks for it.

function tokenHeaders() {
  const token = sessionStorage.getItem("notifier.token");
  return token ? { Authorization: `Bearer ${token}` } : {};
}

async function write(method, path, body) {
  const response = await fetch(path, {
    method, headers: { "Content-Type": "application/json", ...tokenHeaders() },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await response.json(); } catch (_) { data = null; }
  return { status: response.status, data };
}

function parseDuration(text) {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(m|min|h|d)?\s*$/.exec(text);
  if (!match) return null;
  const unit = { m: 60, min: 60, h: 3600, d: 86400 }[match[2] || "h"];
  return Number(match[1]) * unit * 1000;
}

function notifierSilences() {
  pageHeader("silences");
  const form = document.getElementById("silence-form");
  const message = document.getElementById("form-message");
  const tokenRow = document.getElementById("token-row");
  const params = new URLSearchParams(location.search);
  if (params.get("matchers")) form.matchers.value = params.get("matchers");
  form.author.value = localStorage.getItem("notifier.author") || "";
  if (sessionStorage.getItem("notifier.token")) tokenRow.hidden = false;

  function say(text, kind) {
    message.textContent = text;
    message.className = `form-message ${kind}`;
  }

  function askForToken(why) {
    tokenRow.hidden = false;
    form.token.focus();
    say(why, "error");
  }

  function rememberToken() {
    const token = form.token.value.trim();
    if (token) sessionStorage.setItem("notifier.token", token);
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    rememberToken();
    const matchers = form.matchers.value.split("\n").map((m) => m.trim()).filter(Boolean);
    const duration = parseDuration(form.duration.value === "custom" ? form.custom.value : form.duration.value);
    if (duration === null) { say("duration: expected a number of hours, or 90m, 2h, 1d", "error"); return; }
    localStorage.setItem("notifier.author", form.author.value.trim());
    const { status, data } = await write("POST", "/api/silences", {
      matchers, ends_at: Date.now() + duration, author: form.author.value, comment: form.comment.value });
    if (status === 201) {
      say(`Silence created: ${data.silence.matchers.join(", ")} until ${fmtTime(data.silence.ends_at)}.`, "ok");
      form.comment.value = "";
      refresh();
    } else if (status === 401) {
      askForToken("This service requires the API token to change silences: enter it below and press Create again.");
    } else {
      const problems = data && data.problems ? data.problems.map((p) => `${p.field}: ${p.problem}`).join("; ") : "";
      say(`Not created (HTTP ${status}): ${(data && data.message) || ""}${problems ? ` — ${problems}` : ""}`, "error");
    }
  });
  form.duration.addEventListener("change", () => { form.custom.hidden = form.duration.value !== "custom"; });

  async function expire(silence) {
    rememberToken();
    const { status, data } = await write("DELETE", `/api/silences/${encodeURIComponent(silence.id)}`);
    if (status === 200) { say(`Silence ${silence.matchers.join(", ")} expired.`, "ok"); refresh(); }
    else if (status === 401) askForToken("This service requires the API token to expire silences: enter it below and press Expire again.");
    else say(`Not expired (HTTP ${status}): ${(data && data.message) || ""}`, "error");
  }

  async function refresh() {
    try {
      const all = [];
      for (let page = await getJson("/api/silences"); ; page = await getJson(`/api/silences?after=${encodeURIComponent(page.next)}`)) {
        all.push(...page.silences);
        if (!page.next) break;
      }
      const order = { active: 0, pending: 1, expired: 2 };
      const silences = all.sort((a, b) => order[a.state] - order[b.state] || a.ends_at - b.ends_at);
      // Expired silences stay listed (as Alertmanager keeps them) until the retention.
      document.getElementById("none").hidden = silences.some((s) => s.state !== "expired");
      document.querySelector("#silences tbody").replaceChildren(...silences.map((s) => el("tr", { class: `silence ${s.state}`, "data-silence": s.id },
        el("td", {}, el("span", { class: `chip state ${s.state}`, text: s.state })),
        el("td", {}, el("code", { text: s.matchers.join("  ") })),
        el("td", { text: fmtTime(s.starts_at) }),
        el("td", { text: fmtTime(s.ends_at) }),
        el("td", { text: s.author }),
        el("td", { text: s.comment }),
        el("td", {}, s.source === "config" ? el("span", { class: "muted small", text: "from the config file" })
          : s.state === "expired" ? "" : (() => {
            const button = el("button", { type: "button", class: "expire", text: "Expire now" });
            button.addEventListener("click", () => expire(s));
            return button;
          })()))));
      updated();
    } catch (error) {
      if (notConfigured(document.getElementById("silences-box"), error)) form.hidden = true;
      else document.getElementById("updated").textContent = `refresh failed: ${error.message}`;
    }
  }
  refresh();
  setInterval(refresh, REFRESH_MS);
}
