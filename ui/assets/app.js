// The UI's shell: the tabs, the header's lab badge and virtual clock, the router (`#/board`, `#/objects`, `#/events`, `#/traces`,
// `#/trace/{id | resource/namespace/name}`, `#/controllers`, `#/history/{API path}`) and the
// shared informers.
//
// A browser opens at most six HTTP/1.1 connections to one server and every watch holds one,
// so informers run only while a view that needs them is shown (at most three at once),
// leaving connections for the trace and admin requests.

import { h, mount } from "./dom.js";
import { Informer, getJSON } from "./informer.js";
import { board, podLook } from "./board.js";
import { ownershipTree } from "./objects.js";
import { eventFeed } from "./events.js";
import { TracePage } from "./trace.js";
import { ControllersPage } from "./controllers.js";
import { HistoryPage } from "./history.js";

const RESOURCES = {
  nodes: "/api/v1/nodes",
  pods: "/api/v1/pods",
  events: "/api/v1/events",
  deployments: "/apis/apps/v1/deployments",
  replicasets: "/apis/apps/v1/replicasets",
};

const informers = {};
for (const [name, path] of Object.entries(RESOURCES)) informers[name] = new Informer(path, () => scheduleRender());

const main = document.getElementById("main");
const status = document.getElementById("status");
const labBadge = document.getElementById("lab-badge");
const clock = document.getElementById("clock");

function podSummary(pods) {
  const phases = {};
  let ready = 0;
  for (const p of pods) {
    const phase = (p.status && p.status.phase) || "Pending";
    phases[phase] = (phases[phase] || 0) + 1;
    if (((p.status && p.status.conditions) || []).some((c) => c.type === "Ready" && c.status === "True")) ready++;
  }
  const parts = Object.entries(phases).map(([k, v]) => `${v} ${k}`);
  const failing = pods.filter((p) => podLook(p).tone === "bad").length;
  return `${pods.length} pods${parts.length ? `: ${parts.join(", ")}` : ""} (${ready} ready${failing ? `, ${failing} failing` : ""})`;
}

/** The board's colours, as `podLook` gives them. */
const TONES = [["ok", "Running, Ready"], ["warn", "not Ready"], ["pending", "Pending, ContainerCreating"],
  ["bad", "CrashLoopBackOff, Error"], ["terminating", "Terminating"], ["done", "Completed"]];

/** The live views: what each needs and how it draws. */
const LIVE = {
  board: {
    needs: ["nodes", "pods", "events"],
    draw: () => h("div", { class: "board-page" },
      h("div", { class: "board-main" },
        h("p", { class: "summary" }, `${informers.nodes.items.size} nodes · ${podSummary(informers.pods.list())}`,
          h("span", { class: "legend-pods" }, TONES.map(([tone, text]) => h("span", { class: `pod-swatch pod tone-${tone} ready` }, text)),
            h("span", { class: "pod-swatch" }, "dashed: not Ready"))),
        board(informers.nodes.list(), informers.pods.list(), true)),
      h("aside", { class: "board-side" }, h("h2", {}, "Events ", h("a", { href: "#/events", class: "dim" }, "all")), eventFeed(informers.events.list(), 40))),
  },
  objects: {
    needs: ["deployments", "replicasets", "pods"],
    draw: () => ownershipTree(informers.deployments.list(), informers.replicasets.list(), informers.pods.list()),
  },
  events: {
    needs: ["events"],
    draw: () => eventFeed(informers.events.list(), 500),
  },
};

/** Scrolled parts of the live views. */
const KEEP_SCROLL = [".board-side", ".board"];

let current = null; // { name, page? }
let renderTimer = null;

function scheduleRender() {
  if (renderTimer) return;
  renderTimer = setTimeout(() => {
    renderTimer = null;
    render();
  }, 30);
}

function render() {
  if (!current || !LIVE[current.name]) return;
  const view = LIVE[current.name];
  const used = view.needs.map((n) => informers[n]);
  const failed = used.find((i) => i.error);
  if (failed) {
    status.className = "status bad";
    status.textContent = `reconnecting (${failed.error.message})`;
  } else if (used.every((i) => i.synced)) {
    status.className = "status ok";
    status.textContent = "live";
  } else {
    status.className = "status";
    status.textContent = "loading";
  }
  // Redrawing replaces the view's elements: keep where the reader had scrolled to.
  const kept = KEEP_SCROLL.map((sel) => {
    const el = main.querySelector(sel);
    return el && [el.scrollTop, el.scrollLeft];
  });
  const scroll = main.scrollTop;
  mount(main, view.draw());
  main.scrollTop = scroll;
  KEEP_SCROLL.forEach((sel, i) => {
    const el = main.querySelector(sel);
    if (el && kept[i]) [el.scrollTop, el.scrollLeft] = kept[i];
  });
}

/** The views that are pages of their own rather than drawn from informers, each made on
 * first use and kept; `enter` gets the route's further segments. */
const PAGES = {
  traces: { cls: "trace-page", make: (el) => new TracePage(el) },
  controllers: { cls: "controllers-page", make: (el) => new ControllersPage(el) },
  history: { cls: "history-page", make: (el) => new HistoryPage(el) },
};

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  let name = parts[0] || "board";
  if (name === "trace") name = "traces";
  if (current && current.page) current.page.leave();
  const needs = new Set((LIVE[name] && LIVE[name].needs) || []);
  for (const [n, inf] of Object.entries(informers)) (needs.has(n) ? inf.start() : inf.stop());
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.view === name);
  if (LIVE[name]) {
    current = { name };
    render();
  } else if (PAGES[name]) {
    const page = PAGES[name];
    if (!page.page) {
      page.el = h("div", { class: page.cls });
      page.page = page.make(page.el);
    }
    current = { name, page: page.page };
    mount(main, page.el);
    status.className = "status";
    status.textContent = "";
    page.page.enter(parts.slice(1));
  } else {
    current = null;
    mount(main, h("p", { class: "error" }, `No view ${name}.`));
  }
}

/** The header's lab badge: the running lab's step and how many checks pass. */
async function pollLab() {
  try {
    const lab = await getJSON("/miniplane/v1/lab");
    const checks = (lab.checks || []).filter((c) => c.step === lab.step);
    const passed = checks.filter((c) => c.passed).length;
    labBadge.hidden = false;
    labBadge.className = `lab-badge ${lab.done ? "ok" : ""}`;
    labBadge.textContent = lab.done ? `${lab.title}: done` : `${lab.title}: step ${lab.step}/${lab.steps}, ${passed}/${checks.length} checks pass`;
  } catch {
    labBadge.hidden = true;
  }
  setTimeout(pollLab, 3000);
}

/** `2026-12-07T08:04:25.9Z` as `2026-12-07 08:04:25`. */
function clockTime(rfc3339) {
  return rfc3339.replace("T", " ").replace(/(\.\d+)?Z$/, "");
}

/**
 * The header's clock, on a cluster with a virtual one (`up --clock virtual`): its time and
 * pace, read once a second. A cluster on the machine's clock shows none (and is not asked
 * again: a cluster does not switch clocks while it runs).
 */
async function pollClock() {
  let virtual = false;
  try {
    const c = await getJSON("/miniplane/v1/clock");
    virtual = c.mode === "Virtual";
    if (virtual) {
      const pace = c.advancingTo ? `advancing to ${clockTime(c.advancingTo)}` : c.speed === 0 ? "paused" : `${c.speed}×`;
      clock.textContent = `⏱ ${clockTime(c.now)} · ${pace}`;
      clock.className = `clock ${c.speed === 0 ? "paused" : "running"}`;
    }
    clock.hidden = !virtual;
  } catch {
    virtual = true; // not readable now: try again
    clock.hidden = true;
  }
  if (virtual) setTimeout(pollClock, 1000);
}

window.addEventListener("hashchange", route);
route();
pollLab();
pollClock();
