// A run's training curves on its console page (GET /runs/{name}/metrics): loss and images/s in
// total, and each node's images/s and input wait, drawn as SVG; a straggler's line is red and
// named. Loaded before console.js, which calls TrainGridMetrics.show(box, name) on each refresh.
"use strict";

const TrainGridMetrics = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const W = 420, H = 150, PAD = 34;
  const PALETTE = ["#0972d3", "#037f0c", "#8456ce", "#c33d69", "#0f7c7c", "#b2911c"];
  const STRAGGLER = "#d13212";

  function svg(tag, attributes) {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attributes)) node.setAttribute(k, v);
    return node;
  }

  function chart(title, lines, id) {
    // lines: [{name, series: [[t, v], ...], colour, straggler}]
    const all = lines.flatMap((l) => l.series);
    const box = document.createElement("figure");
    box.className = "chart";
    box.id = id;
    const caption = document.createElement("figcaption");
    caption.textContent = title;
    box.append(caption);
    if (!all.length) return box;
    const ts = all.map((p) => p[0]), vs = all.map((p) => p[1]);
    const t0 = Math.min(...ts), t1 = Math.max(...ts) || t0 + 1;
    const v0 = Math.min(0, ...vs), v1 = Math.max(...vs) || 1;
    const x = (t) => PAD + ((t - t0) / (t1 - t0 || 1)) * (W - PAD - 6);
    const y = (v) => H - 18 - ((v - v0) / (v1 - v0 || 1)) * (H - 30);
    const plot = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img",
      "aria-label": title });
    plot.append(svg("line", { x1: PAD, y1: H - 18, x2: W - 6, y2: H - 18, class: "axis" }));
    for (const v of [v0, v1]) {
      const label = svg("text", { x: PAD - 4, y: y(v) + 4, class: "tick", "text-anchor": "end" });
      label.textContent = Math.abs(v) >= 100 ? Math.round(v).toLocaleString("en-US")
        : v.toPrecision(3);
      plot.append(label);
    }
    for (const line of lines) {
      if (!line.series.length) continue;
      const path = svg("polyline", {
        points: line.series.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" "),
        fill: "none", stroke: line.colour, "stroke-width": line.straggler ? 2.5 : 1.5,
        "data-node": line.name, class: line.straggler ? "series straggler" : "series",
      });
      const tip = svg("title", {});
      tip.textContent = line.name;
      path.append(tip);
      plot.append(path);
    }
    box.append(plot);
    if (lines.length > 1) {
      const legend = document.createElement("div");
      legend.className = "chart-legend";
      for (const line of lines) {
        const item = document.createElement("span");
        item.style.color = line.colour;
        item.textContent = line.straggler ? `${line.name} (straggler)` : line.name;
        if (line.straggler) item.className = "straggler";
        legend.append(item);
      }
      box.append(legend);
    }
    return box;
  }

  function perNode(answer, field) {
    return Object.entries(answer.nodes).map(([name, curves], i) => {
      const straggler = name in answer.stragglers;
      return { name, series: curves[field] || [], straggler,
        colour: straggler ? STRAGGLER : PALETTE[i % PALETTE.length] };
    });
  }

  async function show(box, name) {
    const response = await fetch(`/runs/${encodeURIComponent(name)}/metrics`,
      { headers: { Accept: "application/json" } });
    const answer = await response.json().catch(() => null);
    if (!response.ok || !answer) {
      box.replaceChildren(Object.assign(document.createElement("p"), {
        className: "error-text", textContent: (answer && answer.message) || `HTTP ${response.status}` }));
      return;
    }
    if (!Object.keys(answer.nodes).length) {
      box.replaceChildren(Object.assign(document.createElement("p"), {
        className: "muted", textContent: answer.note || "No curves yet: the job has not trained." }));
      return;
    }
    const latest = answer.latest || {};
    const summary = Object.assign(document.createElement("p"), { id: "metrics-latest",
      textContent: `step ${Number(latest.step || 0).toLocaleString("en-US")}, epoch ` +
        `${Number(latest.epoch || 0).toFixed(2)}, loss ${Number(latest.loss || 0).toFixed(4)}, ` +
        `${Object.keys(answer.nodes).length} nodes` });
    const warnings = Object.entries(answer.stragglers).map(([node, why]) =>
      Object.assign(document.createElement("p"), { className: "straggler-note error-text",
        textContent: `Straggler ${node}: ${why}` }));
    // What the API left out of the nodes' files (the job writes them), said as text.
    const ignored = (answer.ignored || []).map((note) =>
      Object.assign(document.createElement("p"), { className: "ignored-note muted",
        textContent: `Left out: ${note}` }));
    const grid = document.createElement("div");
    grid.className = "charts";
    grid.append(
      chart("loss", [{ name: "total", series: answer.loss || [], colour: PALETTE[0] }], "chart-loss"),
      chart("images/s (all nodes)", [{ name: "total", series: answer.images_per_s || [],
        colour: PALETTE[1] }], "chart-images"),
      chart("images/s by node", perNode(answer, "images_per_s"), "chart-node-images"),
      chart("input wait a step (s) by node", perNode(answer, "input_s"), "chart-node-input"));
    box.replaceChildren(summary, ...warnings, ...ignored, grid);
  }

  return { show };
})();
