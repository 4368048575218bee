// ReloadGate dashboard: reads /v1/dashboard and /v1/freshness every few seconds and /v1/forecast once a minute, and draws
// them (tables, and bar charts as SVG); the explain box reads /v1/explain/<id>. No library: the page loads
// nothing but this file and its style sheet.
"use strict";

const refreshSeconds = 5;
const forecastSeconds = 60;
let lastForecast = { at: 0, bundle: null, forecast: null };
const decisionKinds = ["scheduled", "merged", "absorbed", "deferred", "expired", "no-match", "cancelled", "forwarded", "outdated", "after-end"];
const deliveryStates = ["pending", "sending", "sent", "failed"];
const svgNS = "http://www.w3.org/2000/svg";

function $(selector) { return document.querySelector(selector); }

// The token of `reloadgate dashboard` arrives in the address's fragment (#token=...), which the browser never
// sends to a server. It is kept in this tab's sessionStorage (this origin only, port included: no other local
// page can read it), taken out of the address, and sent as a bearer token with every call. Never a cookie: a
// browser would send a cookie of 127.0.0.1 to every port of it, and so with every other local page's requests.
function dashboardToken() {
  const match = /(?:^#|&)token=([A-Za-z0-9_-]+)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem("reloadgate-dashboard-token", match[1]);
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem("reloadgate-dashboard-token");
}

const token = dashboardToken();

function call(path) {
  const headers = token ? { authorization: "Bearer " + token } : {};
  return fetch(path, { cache: "no-store", credentials: "omit", headers });
}

function element(name, attributes = {}, ...children) {
  const node = document.createElement(name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  for (const child of children) node.append(child);
  return node;
}

function svg(name, attributes = {}) {
  const node = document.createElementNS(svgNS, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  return node;
}

function colour(index) {
  return getComputedStyle(document.documentElement).getPropertyValue("--chart-" + ((index % 8) + 1)).trim();
}

function time(text) {
  if (!text) return "–";
  const date = new Date(text);
  return date.toLocaleString(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

function short(token) { return token ? token.slice(0, 8) + "…" : "–"; }

function cell(text, number = false) {
  return element("td", number ? { class: "number" } : {}, String(text));
}

function fill(table, rows) {
  const body = $(table + " tbody");
  body.replaceChildren(...rows);
  if (rows.length === 0) body.append(element("tr", {}, element("td", { colspan: "9", class: "note" }, "None.")));
}

function figures(container, entries) {
  $(container).replaceChildren(...entries.map(([label, name, value]) =>
    element("div", {}, element("dt", {}, label), element("dd", { "data-figure": name }, String(value)))));
}

function setFigure(name, value) {
  const node = document.querySelector(`[data-figure="${name}"]`);
  if (node) node.textContent = String(value);
}

// A bar chart: one bar per column, each bar stacked from `series` (name -> values), with hour labels.
function barChart(container, labels, series, title) {
  const width = 640, height = 180, left = 36, bottom = 22, top = 8;
  const names = Object.keys(series);
  const totals = labels.map((_, column) => names.reduce((sum, name) => sum + (series[name][column] || 0), 0));
  const maximum = Math.max(1, ...totals);
  const step = (width - left) / labels.length;
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title });
  root.append(svg("line", { x1: left, y1: height - bottom, x2: width, y2: height - bottom, class: "axis" }));
  for (const fraction of maximum >= 2 ? [0, 0.5, 1] : [0, 1]) {
    const y = height - bottom - fraction * (height - bottom - top);
    const label = svg("text", { x: left - 4, y: y + 4, "text-anchor": "end" });
    label.textContent = String(Math.round(fraction * maximum));
    root.append(label);
  }
  labels.forEach((label, column) => {
    let base = height - bottom;
    names.forEach((name, index) => {
      const value = series[name][column] || 0;
      if (value === 0) return;
      const barHeight = value / maximum * (height - bottom - top);
      base -= barHeight;
      const bar = svg("rect", { x: left + column * step + 1, y: base, width: Math.max(1, step - 2), height: barHeight, fill: colour(index) });
      const tooltip = svg("title");
      tooltip.textContent = `${label}: ${value} ${name}`;
      bar.append(tooltip);
      root.append(bar);
    });
    if (column % 3 === 0) {
      const text = svg("text", { x: left + column * step + step / 2, y: height - 6, "text-anchor": "middle" });
      text.textContent = label;
      root.append(text);
    }
  });
  // (Colours set through the style object: the page's content security policy refuses style attributes.)
  const legend = element("ul", { class: "legend" }, ...names.map((name, index) => {
    const swatch = element("span");
    swatch.style.background = colour(index);
    return element("li", {}, swatch, name);
  }));
  $(container).replaceChildren(root, names.length > 1 ? legend : "");
}

function hourLabel(text) {
  return new Date(text).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
}

// A word for a POSIX shell: as it is when plain, else in single quotes.
function shellWord(text) {
  return /^[A-Za-z0-9_.,:\/=+-]+$/.test(text) ? text : "'" + text.replaceAll("'", "'\\''") + "'";
}

// The commands that replay the last 24 hours (of the chosen app) with other settings: `reloadgate export`,
// then `reloadgate simulate` with today's budgets as the second policy's starting point.
function whatIfCommands(policies, bundle, pushTypes) {
  const trace = "last-24h.jsonl";
  const exportWords = ["reloadgate", "export", "--since", "24h", ...(bundle ? ["--bundle", bundle] : []),
    "--config", "reloadgate.yaml", "--output", trace];
  const changes = policies.flatMap(policy => {
    const prefix = (pushTypes[policy.pushType]?.kindPrefix ?? "") + (policy.kind == null ? "" : policy.kind + ".");
    return ["--compare-set", `${prefix}daily=${policy.dailyBudget}`, "--compare-set", `${prefix}burst=${policy.burst}`];
  });
  const simulateWords = ["reloadgate", "simulate", trace, "--policy", "reloadgate.yaml", ...changes, "--report", "last-24h.html"];
  return [exportWords, simulateWords].map(words => words.map(shellWord).join(" ")).join("\n");
}

// A kind as the tables show it: a push type with a kind prefix says so ("control: garage"); widgets' kinds
// stand alone. `pushTypes`: the figures' names of each push type.
let pushTypes = {};
function kindLabel(kind, pushType) {
  const names = pushTypes[pushType];
  return names && names.kindPrefix ? `${names.label}: ${kind ?? "–"}` : (kind ?? "–");
}

function render(data) {
  pushTypes = data.pushTypes;
  setFigure("pendingReloads", data.pendingReloads);
  setFigure("pendingDueNow", data.pendingDueNow);
  setFigure("pendingLater", data.pendingLater);
  setFigure("deliveryQueue", data.deliveryQueue);
  setFigure("oldestOpenDelivery", data.oldestOpenDelivery ? time(data.oldestOpenDelivery) : "–");
  setFigure("retries", data.retries);
  setFigure("unknownOutcomes", data.unknownOutcomes);
  setFigure("unregistered", data.unregistered.count);
  figures("#decision-figures", decisionKinds.map(kind => [kind, "decisions." + kind, data.decisions[kind] ?? 0]));
  figures("#delivery-figures", deliveryStates.map(state => [state, "deliveries." + state, data.deliveries[state] ?? 0]));

  barChart("#pending-chart", data.pendingByHour.map(bin => hourLabel(bin.from)),
    { pending: data.pendingByHour.map(bin => bin.count) }, "Pending reloads by hour due");
  const series = {};
  for (const kind of decisionKinds) {
    const values = data.decisionsByHour.map(bin => bin.decisions[kind] || 0);
    if (values.some(value => value > 0)) series[kind] = values;
  }
  barChart("#decisions-chart", data.decisionsByHour.map(bin => hourLabel(bin.hour)), series, "Decisions by hour");

  fill("#pending-list", data.pending.map(row => element("tr", { "data-instance": String(row.instance) },
    cell(time(row.due)), cell(row.bundle), element("td", {}, element("code", { title: row.device }, short(row.device))),
    cell(row.widget), cell(kindLabel(row.kind, row.pushType)), cell(row.priority, true), cell(row.requestCount, true))));

  const budgets = data.budgets;
  $("#budget-scope").textContent = budgets.scope === "all"
    ? "Every widget instance and control, all apps."
    : "The widget instances and controls of this gateway's partitions, all apps.";
  fill("#budget-policies", budgets.policies.map(policy => {
    const capacity = policy.instances * policy.burst;
    const share = capacity > 0 ? Math.round(policy.tokens / capacity * 100) : 0;
    const names = pushTypes[policy.pushType];
    const name = names && names.kindPrefix
      ? (policy.kind == null ? `other ${names.plural}` : kindLabel(policy.kind, policy.pushType))
      : (policy.kind ?? "other kinds");
    return element("tr", {}, cell(name), cell(policy.instances, true),
      cell(`${share}%`, true), cell(policy.empty, true), cell(`${policy.dailyBudget} / ${policy.burst}`, true));
  }));
  fill("#budget-lowest", budgets.lowest.map(entry => element("tr", {},
    cell(entry.bundle ?? "–"), element("td", {}, element("code", { title: entry.device ?? "" }, short(entry.device))),
    cell(entry.widget ?? "–"), cell(kindLabel(entry.kind, entry.pushType)), cell(`${entry.tokens} of ${entry.burst}`, true),
    cell(time(entry.nextToken)))));

  $("#whatif-commands").textContent = whatIfCommands(budgets.policies, $("#bundle").value, pushTypes);

  fill("#failures", Object.entries(data.failures).sort((a, b) => b[1] - a[1]).map(([reason, count]) =>
    element("tr", {}, cell(reason), cell(count, true))));
  fill("#unregistered-list", data.unregistered.recent.map(device => element("tr", {},
    cell(time(device.since)), cell(device.bundle), element("td", {}, element("code", { title: device.device }, short(device.device))))));

  const select = $("#bundle");
  const chosen = select.value;
  const known = new Set([...select.options].map(option => option.value));
  for (const bundle of data.bundles) {
    if (!known.has(bundle)) select.append(element("option", { value: bundle }, bundle));
  }
  select.value = chosen;
}

// The herd forecast: reloads per hour, stacked by kind (the seven with most reloads, then the rest).
function renderForecast(forecast) {
  setFigure("forecast.total", forecast.total);
  setFigure("forecast.peak", forecast.peak ? forecast.peak.count : 0);
  setFigure("forecast.peakAt", forecast.peak ? time(forecast.peak.minute) : "–");
  setFigure("forecast.breaches", forecast.breaches.length);
  const start = new Date(forecast.start).getTime();
  const hours = Math.ceil(forecast.minutes / 60);
  const labels = Array.from({ length: hours }, (_, hour) => hourLabel(new Date(start + hour * 3600000).toISOString()));
  const totals = new Map();
  for (const series of forecast.series) totals.set(series.kind, (totals.get(series.kind) || 0) + series.total);
  const shown = [...totals.entries()].sort((a, b) => b[1] - a[1]).slice(0, 7).map(entry => entry[0]);
  const stacks = {};
  for (const series of forecast.series) {
    const name = shown.includes(series.kind) ? series.kind : "other kinds";
    stacks[name] = (stacks[name] || new Array(hours).fill(0)).map((value, hour) => value + (series.perHour[hour] || 0));
  }
  barChart("#forecast-chart", labels, stacks, "Reloads by the hour they are planned");
  fill("#forecast-breaches", forecast.breaches.slice(0, 20).map(breach => element("tr", {},
    cell(time(breach.minute)), cell(breach.bundle), cell(breach.count, true), cell(breach.threshold, true))));
}

// Freshness: per app and kind against its objective, and the day's requests by hour, within or not.
function duration(milliseconds) {
  if (milliseconds == null) return "–";
  if (milliseconds < 1000) return `${milliseconds}ms`;
  for (const [unit, length] of [["d", 86400000], ["h", 3600000], ["m", 60000], ["s", 1000]]) {
    if (milliseconds >= length && milliseconds % length === 0) return `${milliseconds / length}${unit}`;
  }
  return `${(milliseconds / 1000).toFixed(1)}s`;
}

function share(window) {
  return window.share == null ? "–" : `${window.within} of ${window.requests} (${Math.round(window.share * 1000) / 10}%)`;
}

function renderFreshness(freshness) {
  const kinds = freshness.kinds;
  const judged = kinds.filter(kind => kind.hour.met !== null);
  setFigure("freshness.kinds", kinds.length);
  setFigure("freshness.met", judged.filter(kind => kind.hour.met).length);
  setFigure("freshness.below", judged.filter(kind => !kind.hour.met).length);
  setFigure("freshness.requests", kinds.reduce((sum, kind) => sum + kind.hour.requests, 0));
  const now = new Date(freshness.at).getTime();
  const labels = Array.from({ length: 24 }, (_, index) => hourLabel(new Date(now - (23 - index) * 3600000).toISOString()));
  const within = new Array(24).fill(0), missed = new Array(24).fill(0);
  for (const kind of kinds) {
    kind.hourlyRequests.forEach((count, hour) => {
      within[hour] += kind.hourlyWithin[hour];
      missed[hour] += count - kind.hourlyWithin[hour];
    });
  }
  barChart("#freshness-chart", labels, { "within objective": within, "missed": missed }, "Requests by the hour, within their objective or not");
  fill("#freshness-kinds", kinds.map(kind => element("tr", { "data-kind": kind.kind },
    cell(kind.bundle), cell(kind.kind), cell(`${Math.round(kind.objectiveQuantile * 1000) / 10}% in ${duration(kind.objectiveWithin)}`),
    cell(share(kind.hour), true), cell(share(kind.day), true), cell(kind.hour.p90 == null ? "–" : "≤" + duration(kind.hour.p90), true),
    cell(kind.day.misses.slice(0, 3).map(miss => `${miss.cause} ${miss.count}`).join(", ") || "–"))));
}

async function refresh() {
  const status = $("#status");
  const bundle = $("#bundle").value;
  try {
    const query = bundle ? "?bundle=" + encodeURIComponent(bundle) : "";
    // The forecast scans every planned reload: read once a minute, or when another app is chosen, not at
    // every refresh.
    const forecastDue = Date.now() - lastForecast.at >= forecastSeconds * 1000 || lastForecast.bundle !== bundle;
    const [response, forecastResponse, freshnessResponse] = await Promise.all([
      call("/v1/dashboard" + query), forecastDue ? call("/v1/forecast" + query) : null, call("/v1/freshness" + query),
    ]);
    const data = await response.json();
    if (!response.ok) throw new Error(data.message || response.statusText);
    if (forecastResponse) {
      const forecast = await forecastResponse.json();
      if (!forecastResponse.ok) throw new Error(forecast.message || forecastResponse.statusText);
      lastForecast = { at: Date.now(), bundle, forecast };
    }
    const freshness = await freshnessResponse.json();
    if (!freshnessResponse.ok) throw new Error(freshness.message || freshnessResponse.statusText);
    render(data);
    renderForecast(lastForecast.forecast);
    renderFreshness(freshness);
    status.textContent = "Updated " + new Date(data.now).toLocaleTimeString();
    status.classList.remove("error");
    document.body.dataset.loaded = data.now;
  } catch (error) {
    status.textContent = "Cannot read the gateway: " + error.message;
    status.classList.add("error");
  }
}

function describeRequest(request) {
  const rows = request.decisions.map(decision => element("tr", {},
    cell(decision.decision), cell(decision.widget ?? "–"), element("td", {}, element("code", {}, short(decision.device))),
    cell(decision.due ? time(decision.due) : "–"), cell(decision.reason)));
  return element("div", {},
    element("p", {}, `Request ${request.id} (${request.source}, ${request.bundle}), received ${time(request.receivedAt)}, priority ${request.priority}` +
      (request.apnsId ? `, apns-id ${request.apnsId}` : "")),
    element("div", { class: "scroll" }, element("table", { "data-request": String(request.id) },
      element("thead", {}, element("tr", {}, ...["Decision", "Widget", "Device", "Due", "Reason"].map(name => element("th", { scope: "col" }, name)))),
      element("tbody", {}, ...rows))));
}

async function explain(event) {
  event.preventDefault();
  const id = $("#explain-id").value.trim();
  const result = $("#explain-result");
  if (!id) return;
  try {
    const response = await call("/v1/explain/" + encodeURIComponent(id));
    const data = await response.json();
    if (!response.ok) throw new Error(data.message || response.statusText);
    const parts = [];
    if (data.request) {
      parts.push(describeRequest(data.request));
      for (const delivery of data.deliveries) {
        parts.push(element("p", {}, `Delivered as ${delivery.apnsId}: ${delivery.state}, ${delivery.attempts} attempt(s)` +
          (delivery.lastError ? `, last error ${delivery.lastError}` : "")));
      }
    } else if (data.delivery) {
      parts.push(element("p", {}, `Delivery ${data.delivery.apnsId} to ${short(data.delivery.device)}: ${data.delivery.state}, ` +
        `${data.delivery.attempts} attempt(s), released ${time(data.delivery.releasedAt)}`));
      for (const request of data.requests) parts.push(describeRequest(request));
    }
    result.replaceChildren(...parts);
  } catch (error) {
    result.replaceChildren(element("p", { class: "error" }, error.message));
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("#bundle").addEventListener("change", refresh);
  $("#explain-form").addEventListener("submit", explain);
  refresh();
  setInterval(refresh, refreshSeconds * 1000);
});
