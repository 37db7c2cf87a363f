// The TrainGrid console: reads only the TrainGrid API (GET /runs, /runs/{name}, /runs/{name}/logs)
// and the graphs the server draws from the deployed state machines. No framework, no network
// beyond this server: it works offline.
"use strict";

const REFRESH_MS = 1500;
const OUTCOMES = ["succeeded", "retried", "caught", "failed", "running", "not-reached"];
const PIPELINES = { training: "TrainingRun", campaign: "CampaignFanout" };
const STATUSES = ["RUNNING", "SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"];
const filters = { pipeline: "", status: "", pages: [null] }; // pages: tokens of pages seen
const graphs = new Map(); // pipeline → Promise of its SVG text
let config = { emulated: true };
let timer = null;
let generation = 0; // a page's refreshes stop when another page is shown

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else node.setAttribute(name, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

async function api(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" } });
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const error = new Error((body && body.message) || `HTTP ${response.status}`);
    error.status = response.status;
    throw error;
  }
  return body;
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "-";
  if (seconds < 60) return `${seconds.toFixed(1)}s`;
  const hours = Math.floor(seconds / 3600), minutes = Math.floor((seconds % 3600) / 60);
  return hours ? `${hours}h${String(minutes).padStart(2, "0")}m`
    : `${minutes}m${String(Math.floor(seconds % 60)).padStart(2, "0")}s`;
}

const usd = (amount) => `$${Number(amount).toLocaleString("en-US", { maximumFractionDigits: 2 })}`;
const status = (value) => el("span", { class: `status ${value}`, "data-status": value }, value);
const page = () => document.getElementById("page");

function later(gen, refresh) {
  if (gen === generation) timer = setTimeout(refresh, REFRESH_MS);
}

function problem(message) {
  return el("section", { class: "problem", role: "alert" }, el("strong", {}, message));
}

// ---- the runs of both pipelines, newest first, live ------------------------------------------

function showRuns(gen) {
  const body = el("tbody");
  const more = el("button", { type: "button", id: "older" }, "Older runs");
  const first = el("button", { type: "button", id: "newest" }, "Newest");
  const notice = el("div");
  const select = (name, choices) => {
    const node = el("select", { id: `filter-${name}` }, el("option", { value: "" }, "all"),
      Object.entries(choices).map(([value, label]) =>
        el("option", { value, selected: filters[name] === value }, label)));
    node.addEventListener("change", () => {
      filters[name] = node.value;
      filters.pages = [null];
      route();
    });
    return node;
  };
  page().replaceChildren(el("section", {},
    el("h1", {}, "Runs"),
    el("div", { class: "filters" },
      el("label", {}, "pipeline ", select("pipeline", PIPELINES)),
      el("label", {}, "status ", select("status",
        Object.fromEntries(STATUSES.map((s) => [s, s])))),
      first, more, el("span", { class: "muted", id: "updated" })),
    notice,
    el("table", { id: "runs" }, el("thead", {}, el("tr", {}, ["run", "pipeline", "status",
      "started", "duration"].map((c) => el("th", {}, c)))), body)));
  more.addEventListener("click", () => {
    filters.pages.push(more.dataset.token);
    route();
  });
  first.addEventListener("click", () => {
    filters.pages = [null];
    route();
  });

  async function refresh() {
    const query = new URLSearchParams({ limit: "25" });
    if (filters.pipeline) query.set("pipeline", filters.pipeline);
    if (filters.status) query.set("status", filters.status);
    const token = filters.pages[filters.pages.length - 1];
    if (token) query.set("next_token", token);
    try {
      const answer = await api(`/runs?${query}`);
      if (gen !== generation) return;
      notice.replaceChildren();
      body.replaceChildren(...answer.runs.map((run) => el("tr", { "data-run": run.name },
        el("td", {}, el("a", { href: `#/runs/${encodeURIComponent(run.name)}` }, run.name)),
        el("td", {}, run.pipeline), el("td", {}, status(run.status)),
        el("td", {}, run.started_at), el("td", { class: "num" }, duration(run.duration_s)))));
      if (!answer.runs.length) {
        body.append(el("tr", {}, el("td", { colspan: 5, class: "muted" },
          "No runs yet. Start one with POST /runs, traingrid submit, or an upload.")));
      }
      more.hidden = !answer.next_token;
      more.dataset.token = answer.next_token || "";
      first.hidden = filters.pages.length === 1;
      document.getElementById("updated").textContent =
        `updated ${new Date().toLocaleTimeString()}`;
    } catch (error) {
      if (gen !== generation) return;
      notice.replaceChildren(problem(`The API did not answer: ${error.message}`));
    }
    later(gen, refresh);
  }
  return refresh();
}

// ---- one run: graph, timeline, failure, log, regional jobs, cost ------------------------------

function graphOf(pipeline) {
  if (!graphs.has(pipeline)) {
    graphs.set(pipeline, fetch(`/console/graphs/${pipeline}.svg`).then((response) => {
      if (!response.ok) throw new Error(`no graph of ${pipeline} (HTTP ${response.status})`);
      return response.text();
    }));
  }
  return graphs.get(pipeline);
}

function colour(box, run) {
  const current = run.status === "RUNNING" ? run.current_state : null;
  for (const state of box.querySelectorAll("[data-state]")) {
    const seen = run.by_state[state.dataset.state];
    state.classList.remove(...OUTCOMES, "current");
    state.classList.add(seen ? seen.outcome : "not-reached");
    if (state.dataset.state === current) state.classList.add("current", "running");
    state.dataset.outcome = seen ? seen.outcome : "not-reached";
    const visits = state.querySelector(":scope > .visits");
    if (visits) visits.textContent = seen && seen.visits > 1 ? `×${seen.visits}` : "";
  }
}

function timeline(run) {
  const total = Math.max(run.duration_s || 0, ...run.states.map((s) => s.offset_s + s.duration_s),
    0.001);
  const rows = new Map();
  for (const visit of run.states) {
    if (!rows.has(visit.state)) rows.set(visit.state, []);
    rows.get(visit.state).push(visit);
  }
  const table = el("table", { id: "timeline" }, el("thead", {}, el("tr", {},
    ["state", "visits", "first entered", "time in state", "", "outcome"].map((c) =>
      el("th", {}, c)))));
  const body = el("tbody");
  for (const [state, visits] of rows) {
    const spent = visits.reduce((sum, v) => sum + v.duration_s, 0);
    const outcome = run.by_state[state] ? run.by_state[state].outcome : visits.at(-1).outcome;
    const errors = [...new Set(visits.flatMap((v) => v.errors || []))];
    body.append(el("tr", { "data-state": state },
      el("td", {}, state), el("td", { class: "num" }, run.by_state[state]?.visits ?? visits.length),
      el("td", { class: "num" }, `+${duration(visits[0].offset_s)}`),
      el("td", { class: "num" }, duration(spent)),
      el("td", {}, el("div", { class: "bar" }, visits.map((v) => el("i", {
        class: v.outcome, title: `${v.outcome}, ${duration(v.duration_s)}`,
        style: `left:${(v.offset_s / total) * 100}%;width:${(v.duration_s / total) * 100}%`,
      })))),
      el("td", {}, el("span", { class: `outcome ${outcome}` }, outcome),
        errors.length ? ` (${errors.join(", ")})` : "")));
  }
  table.append(body);
  return table;
}

function facts(pairs) {
  return el("table", { class: "facts" }, el("tbody", {}, pairs.filter(([, v]) => v !== undefined)
    .map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v)))));
}

function cost(run) {
  if (!run.estimate) return el("p", { class: "muted" }, "Known once the run is planned.");
  const names = {
    compute_usd_per_hour: "compute per hour", fsx_usd_per_hour: "file system per hour",
    max_usd: "at most (training limit)", usd_per_hour: "all regions per hour",
    estimated_usd: "expected in all",
  };
  // What it has cost (the API's receipt), then what its plan estimated.
  const spent = [];
  if (run.cost) {
    const actual = run.cost.actual;
    spent.push([run.cost.in_flight ? "spent so far" : "spent", usd(actual.total)],
      ["compute", usd(actual.compute)], ["file system", usd(actual.file_system)],
      ["orchestration", usd(actual.orchestration)]);
    if (actual.staging) spent.push(["staging", usd(actual.staging)]);
    const good = run.cost.goodput;
    if (good && good.goodput !== null) {
      // Productive over paid node-hours, then where the rest went (the largest first).
      spent.push(["goodput", `${(good.goodput * 100).toFixed(1)}% (` +
        `${good.productive_node_hours.toFixed(2)} of ${good.paid_node_hours.toFixed(2)} ` +
        "node-hours productive)"]);
      Object.entries(good.lost_node_hours).filter(([, h]) => h > 0).sort((a, b) => b[1] - a[1])
        .forEach(([cause, h]) => spent.push([`lost to ${cause.replace("_", " ")}`,
          `${h.toFixed(2)} node-hours`]));
    }
  }
  return facts(spent.concat(Object.entries(run.estimate).map(([k, v]) => [
    `estimate: ${names[k] || k}`, usd(v)])));
}

function regionJobs(run) {
  const body = el("tbody", {}, run.jobs.map((job) => {
    const moves = (job.tried || job.moves || []).map((m) => `${m.region}: ${m.reason}`);
    return el("tr", { "data-region": job.requested_region },
      el("td", {}, job.requested_region), el("td", {}, job.region),
      el("td", {}, el("span", { class: "region-status" }, job.status || "")),
      el("td", { class: "num" }, job.instance_count ?? ""),
      el("td", { class: "num" }, job.estimated_usd === undefined ? "" : usd(job.estimated_usd)),
      el("td", {}, job.placement_reason || "",
        moves.length ? el("div", { class: "muted" }, `moved from ${moves.join("; ")}`) : null,
        job.cause ? el("div", { class: "error-text" }, job.cause) : null));
  }));
  return el("table", { id: "jobs" }, el("thead", {}, el("tr", {}, ["data in", "trains in",
    "status", "instances", "estimate", "where and why"].map((c) => el("th", {}, c)))), body);
}

function links(run) {
  const items = [el("li", {}, "execution ", el("code", {}, run.execution_arn))];
  if (config.emulated) {
    items.push(el("li", { class: "muted" }, "This run is in the embedded emulator; on a " +
      "deployed stack the Step Functions console shows it."));
  } else {
    items.push(el("li", {}, el("a", { href: run.console_url, target: "_blank", rel: "noopener" },
      "Open in the Step Functions console")));
  }
  for (const artifact of run.artifacts) {
    items.push(el("li", {}, artifact.region ? `${artifact.region}: ` : "results: ",
      el("code", {}, artifact.location)));
  }
  return el("ul", { class: "links" }, items);
}

function showRun(name, gen) {
  const parts = {
    meta: el("div", { class: "meta" }), failure: el("div"), graph: el("div", { class: "graph-box" }),
    timeline: el("div"), cost: el("div"), jobs: el("section", { hidden: true }), log: el("div"),
    links: el("div"), curves: el("div", { id: "curves" }),
  };
  const legend = el("div", { class: "legend" }, OUTCOMES.map((o) => el("span", { class: o },
    o.replace("-", " "))));
  page().replaceChildren(
    el("p", {}, el("a", { href: "#/" }, "← all runs")),
    el("section", {}, el("h1", { id: "run-name" }, name), parts.meta), parts.failure,
    parts.jobs,
    el("section", {}, el("h2", {}, "Training"), parts.curves),
    el("div", { class: "columns" },
      el("div", {}, el("section", {}, el("h2", {}, "Graph"), legend, parts.graph)),
      el("div", {}, el("section", {}, el("h2", {}, "Cost"), parts.cost),
        el("section", {}, el("h2", {}, "Timeline"), parts.timeline),
        el("section", {}, el("h2", {}, "Training log"), parts.log),
        el("section", {}, el("h2", {}, "Where"), parts.links))));
  let refreshes = 0;

  async function showLog() {
    try {
      const answer = await api(`/runs/${encodeURIComponent(name)}/logs`);
      if (gen !== generation) return;
      if (!answer.log) {
        parts.log.replaceChildren(el("p", { class: "muted" }, answer.note ||
          "No log yet: the job has not started."));
        return;
      }
      parts.log.replaceChildren(el("p", { class: "muted" }, answer.log.source),
        el("pre", { class: "log", id: "log" }, answer.log.lines.join("\n")));
    } catch (error) {
      parts.log.replaceChildren(el("p", { class: "error-text" }, error.message));
    }
  }

  async function refresh() {
    let run;
    try {
      run = await api(`/runs/${encodeURIComponent(name)}`);
    } catch (error) {
      if (gen !== generation) return;
      parts.failure.replaceChildren(problem(error.message));
      if (error.status !== 404) later(gen, refresh);
      return;
    }
    if (gen !== generation) return;
    const now = run.status === "RUNNING" && run.current_state;
    parts.meta.replaceChildren(el("span", { id: "run-status" }, status(run.status)),
      el("span", {}, run.pipeline), el("span", {}, `started ${run.started_at}`),
      el("span", {}, duration(run.duration_s)),
      now ? el("span", { id: "current-state" }, `now in ${now}`) : "",
      el("span", { class: "muted" }, `updated ${new Date().toLocaleTimeString()}`));
    parts.failure.replaceChildren(run.error ? el("section", { class: "problem", id: "failure" },
      el("strong", {}, run.error), el("pre", {}, run.cause || "")) : "");
    if (!parts.graph.firstChild) {
      try {
        parts.graph.innerHTML = await graphOf(run.pipeline); // drawn by this server, not data
      } catch (error) {
        parts.graph.replaceChildren(el("p", { class: "error-text" }, error.message));
      }
    }
    colour(parts.graph, run);
    parts.timeline.replaceChildren(timeline(run), run.states_omitted
      ? el("p", { class: "muted" }, `${run.states_omitted} earlier visits are not shown.`) : "");
    parts.cost.replaceChildren(cost(run));
    if (run.jobs) {
      parts.jobs.hidden = false;
      parts.jobs.replaceChildren(el("h2", {}, "Regional jobs"), regionJobs(run));
    }
    parts.links.replaceChildren(links(run));
    const running = run.status === "RUNNING";
    if (!running || refreshes % 3 === 0) await showLog();
    await TrainGridMetrics.show(parts.curves, name).catch((error) =>
      parts.curves.replaceChildren(el("p", { class: "error-text" }, error.message)));
    refreshes += 1;
    document.body.dataset.runStatus = run.status;
    if (running) later(gen, refresh);
  }
  return refresh();
}

function route() {
  clearTimeout(timer);
  generation += 1;
  const run = location.hash.match(/^#\/runs\/([^/]+)$/);
  if (run) showRun(decodeURIComponent(run[1]), generation);
  else showRuns(generation);
}

async function start() {
  try {
    config = await api("/console/config.json");
  } catch (error) {
    // Without its settings the console still works; it just says less about where runs are.
  }
  const stack = config.stack ? `stack ${config.stack} (${config.region}) · ` : "";
  document.getElementById("where").textContent = config.emulated
    ? "the embedded emulator" : `${stack}${config.api || ""}`;
  window.addEventListener("hashchange", route);
  route();
}

start();
