// The status page: plain JavaScript, no build step, nothing fetched but this service's API.
"use strict";

const REFRESH_MS = 5000;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

function badge(status) {
  return el("span", { class: `badge ${status}`, text: status });
}

function humanSeconds(s) {
  if (s === null || s === undefined) return "—";
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

function humanNumber(n) {
  if (n === null || n === undefined) return "—";
  return n.toLocaleString("en-US");
}

function sparkline(values) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("viewBox", "0 0 120 24");
  if (!values || values.length < 2) return svg;
  const max = Math.max(...values, 1);
  const step = 120 / (values.length - 1);
  const points = values.map((v, i) => `${(i * step).toFixed(1)},${(22 - (v / max) * 20).toFixed(1)}`);
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", points.join(" "));
  svg.append(line);
  return svg;
}

const RANK = { ERR: 3, WARN: 2, OK: 1, NOTFOUND: 0 };

function clock(ms) {
  return new Date(ms).toISOString().slice(11, 19);
}

// Evidence as key → values, one line each; times (keys naming a timestamp) as UTC clock times.
function evidenceTable(evidence) {
  const rows = Object.entries(evidence || {}).map(([key, value]) => {
    const isTime = /timestamp|^ts$|last_true/.test(key);
    const show = (v) => (v === null ? "·" : isTime && typeof v === "number" ? clock(v) : String(v));
    const text = Array.isArray(value) ? value.map(show).join("  ") : typeof value === "object" && value !== null ? JSON.stringify(value) : show(value);
    return el("tr", {}, el("th", { text: key }), el("td", { text }));
  });
  return el("table", { class: "evidence" }, el("tbody", {}, ...rows));
}

function notifierIndex() {
  const state = { groups: [], sortKey: "status", sortDesc: true };
  const body = document.querySelector("#groups tbody");
  const filter = document.getElementById("filter");
  const onlyProblems = document.getElementById("only-problems");
  const params = new URLSearchParams(location.search);
  if (params.get("q")) filter.value = params.get("q");

  function compare(a, b) {
    const key = state.sortKey;
    let x = a[key], y = b[key];
    if (key === "status") { x = RANK[x]; y = RANK[y]; }
    if (x === null || x === undefined) x = -Infinity;
    if (y === null || y === undefined) y = -Infinity;
    const order = x < y ? -1 : x > y ? 1 : a.group.localeCompare(b.group);
    return state.sortDesc ? -order : order;
  }

  function render() {
    const q = filter.value.trim().toLowerCase();
    const rows = state.groups
      .filter((g) => !onlyProblems.checked || g.status === "WARN" || g.status === "ERR")
      .filter((g) => !q || [g.cluster, g.group, g.status, ...g.rules].join(" ").toLowerCase().includes(q))
      .sort(compare);
    body.replaceChildren(...rows.map((g) => {
      const link = el("a", { href: `/groups/${encodeURIComponent(g.cluster)}/${encodeURIComponent(g.group)}`, text: g.group });
      const marks = el("td");
      if (g.incident_id) marks.append(el("span", { class: "mark", text: `incident ${g.incident_id.slice(0, 8)}` }));
      if (g.silenced) marks.append(el("span", { class: "mark silenced", text: "silenced" }));
      if (g.partial) marks.append(el("span", { class: "mark partial", text: "partial" }));
      if (g.stale) marks.append(el("span", { class: "mark stale", text: `stale: ${humanSeconds(g.data_age_seconds)} old` }));
      return el("tr", { class: `status-${g.status}`, "data-group": g.group, "data-status": g.status },
        el("td", {}, badge(g.status)),
        el("td", { text: g.cluster }),
        el("td", {}, link),
        el("td", { class: "num", text: humanNumber(g.total_lag) }),
        el("td", { class: "num", text: humanSeconds(g.max_lag_seconds) }),
        el("td", {}, sparkline(g.lag_history)),
        el("td", { class: "num", text: g.partitions }),
        el("td", { class: "num", text: g.complete.toFixed(2) }),
        el("td", { text: g.rules.join(", ") }),
        marks);
    }));
    document.getElementById("empty").hidden = state.groups.length > 0;
    const counts = { OK: 0, WARN: 0, ERR: 0 };
    for (const g of state.groups) counts[g.status] = (counts[g.status] || 0) + 1;
    document.getElementById("summary").textContent =
      `${state.groups.length} groups · ${counts.ERR} ERR · ${counts.WARN} WARN · ${counts.OK} OK`;
    for (const th of document.querySelectorAll("th[data-key]")) {
      th.classList.toggle("sorted-desc", th.dataset.key === state.sortKey && state.sortDesc);
      th.classList.toggle("sorted-asc", th.dataset.key === state.sortKey && !state.sortDesc);
    }
  }

  async function refresh() {
    try {
      const response = await fetch("/api/groups");
      const data = await response.json();
      state.groups = data.groups;
      const down = data.clusters.filter((c) => c.down).map((c) => c.cluster);
      const stale = data.clusters.filter((c) => c.stale).map((c) => c.last_scan === null
        ? `${c.cluster}: not scanned yet`
        : `${c.cluster}: data ${humanSeconds(c.data_age_seconds)} old (last scan ${clock(c.last_scan)} UTC)`);
      const problems = [];
      if (down.length) problems.push(`cluster down: ${down.join(", ")}`);
      if (stale.length) problems.push(`stale — ${stale.join("; ")}`);
      const banner = document.getElementById("clusters");
      banner.textContent = problems.join(" · ");
      banner.className = stale.length ? "stale" : "";
      document.getElementById("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
      render();
    } catch (error) {
      document.getElementById("updated").textContent = `refresh failed: ${error}`;
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

function notifierGroup() {
  const parts = location.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  const [cluster, group] = [parts[1], parts.slice(2).join("/")];
  document.getElementById("title").textContent = `${cluster} / ${group}`;
  document.title = `notifier — ${group}`;

  function card(label, value) {
    return el("div", { class: "card" }, el("div", { class: "label", text: label }), el("div", { class: "value", text: value }));
  }

  function render(g) {
    document.getElementById("badge").replaceChildren(badge(g.status));
    document.getElementById("overview").replaceChildren(
      card("total lag", humanNumber(g.total_lag)),
      card("behind", humanSeconds(g.max_lag_seconds)),
      card("complete", `${g.complete.toFixed(2)}${g.partial ? " (partial)" : ""}`),
      card("Burrow complete", g.burrow_complete.toFixed(2)),
      card("group state", `${g.group_state}, ${g.members} members`),
      card("incident", g.incident_id ? g.incident_id.slice(0, 12) + (g.silenced ? " (silenced)" : "") : "none"),
      card("data age", `${humanSeconds(g.data_age_seconds)}${g.stale ? " — stale" : ""}`));
    document.getElementById("overview").classList.toggle("stale", g.stale);
    const findings = document.getElementById("findings");
    findings.replaceChildren(...(g.findings.length ? g.findings.map((f) => el("div",
      { class: `finding ${f.severity}`, "data-rule": f.rule },
      el("div", {}, badge(f.status), " ", el("strong", { text: f.rule }),
        f.topic !== null ? ` on ${f.topic}/${f.partition}` : "", " — ", f.message),
      el("details", { open: "" }, el("summary", { text: "evidence" }), evidenceTable(f.evidence)))) :
      [el("p", { class: "muted", text: "Nothing is firing." })]));
    const body = document.querySelector("#partitions tbody");
    body.replaceChildren(...g.partitions.map((p) => el("tr", { class: `status-${p.status === "OK" ? "OK" : p.status === "WARN" ? "WARN" : "ERR"}` },
      el("td", { text: `${p.topic}/${p.partition}` }, ...(p.leo_reset ? [" ", el("span", {
        class: "mark", "data-leo-reset": "",
        title: `log-end offset went from ${humanNumber(p.leo_reset.previous_log_end_offset)} back to ${humanNumber(p.leo_reset.log_end_offset)}: lag in seconds started over`,
        text: `log restarted ${clock(p.leo_reset.at)}` })] : [])),
      el("td", {}, badge(p.status)),
      el("td", { class: "num", text: humanNumber(p.current_lag) }),
      el("td", { class: "num", text: humanSeconds(p.lag_seconds) }),
      el("td", { class: "num", text: humanNumber(p.committed_offset) }),
      el("td", { class: "num", text: humanNumber(p.log_end_offset) }),
      el("td", { class: "num", text: humanNumber(p.log_start_offset) }),
      el("td", { class: "num", text: p.complete.toFixed(2) }),
      el("td", {}, sparkline(p.window.map((s) => s.lag || 0)), " ", el("span", { class: "muted", text: p.window.map((s) => s.lag ?? "·").join(" ") })))));
    document.getElementById("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
  }

  async function refresh() {
    const response = await fetch(`/api/groups/${encodeURIComponent(cluster)}/${encodeURIComponent(group)}`);
    if (response.status === 404) {
      document.getElementById("badge").replaceChildren(badge("NOTFOUND"));
      return;
    }
    render(await response.json());
  }
  refresh();
  setInterval(refresh, REFRESH_MS);
}
