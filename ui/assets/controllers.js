// The controllers' workqueues and the running lab, from miniplane's admin API
// (docs/faults.md): depth, in flight, waiting, retries and the queued keys of each
// controller, with pause, step and resume buttons (a `PauseController` fault), the faults in
// force, and the current lab step with its checks. Every panel says so when the API server
// it talks to has no such endpoint (404), instead of failing.

import { h, mount, age } from "./dom.js";
import { getJSON } from "./informer.js";

const ADMIN = "/miniplane/v1";
/** A report older than this means the controller-manager stopped reporting (docs/faults.md). */
const STALE_MS = 5000;

async function post(path, body) {
  return getJSON(path, {
    method: "POST",
    headers: { Accept: "application/json", "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

function missing(what) {
  return h("p", { class: "dim" }, `This API server has no ${what} (the admin API of docs/faults.md is not in this build).`);
}

function keys(list) {
  if (!list || !list.length) return h("span", { class: "dim" }, "\u2013");
  return list.map((k) => h("code", { class: "key" }, k));
}

export class ControllersPage {
  constructor(root) {
    this.root = root;
    this.timer = null;
    this.queuesEl = h("div", { class: "queues" });
    this.faultsEl = h("div", { class: "faults" });
    this.labEl = h("div", { class: "lab" });
    this.messageEl = h("p", { class: "error", role: "status" });
    mount(root,
      h("section", { class: "panel" }, h("h2", {}, "Controllers and their workqueues"), this.messageEl, this.queuesEl),
      h("section", { class: "panel" }, h("h2", {}, "Faults in force"), this.faultsEl),
      h("section", { class: "panel" }, h("h2", {}, "Lab"), this.labEl));
  }

  enter() {
    this.leave();
    this.poll(this.generation);
  }

  leave() {
    clearTimeout(this.timer);
    this.timer = null;
    this.generation = (this.generation || 0) + 1;
  }

  /** Refreshes every panel each second until the page is left. */
  async poll(generation) {
    await Promise.all([this.refreshQueues(), this.refreshFaults(), this.refreshLab()]);
    if (generation === this.generation) this.timer = setTimeout(() => this.poll(generation), 1000);
  }

  async act(name, action) {
    mount(this.messageEl);
    try {
      await post(`${ADMIN}/controllers/${encodeURIComponent(name)}/${action}`);
    } catch (e) {
      mount(this.messageEl, `${action} ${name}: ${e.message}`);
    }
    await Promise.all([this.refreshQueues(), this.refreshFaults()]);
  }

  async refreshQueues() {
    let items;
    try {
      ({ items } = await getJSON(`${ADMIN}/controllers`));
    } catch (e) {
      mount(this.queuesEl, e.code === 404 ? missing("controller reports") : h("p", { class: "error" }, e.message));
      return;
    }
    if (!items.length) {
      mount(this.queuesEl, h("p", { class: "dim" }, "No controller-manager has reported its queues yet."));
      return;
    }
    const now = Date.now();
    const head = ["controller", "state", "depth", "in flight", "waiting", "adds", "retries", "syncs", "errors", "queued keys", "processing", "reported", ""];
    mount(this.queuesEl, h("table", { class: "queue-table" },
      h("thead", {}, h("tr", {}, head.map((t) => h("th", {}, t)))),
      h("tbody", {}, items.map((c) => {
        const stale = !c.reportedAt || now - Date.parse(c.reportedAt) > STALE_MS;
        return h("tr", { "data-controller": c.name, class: `${c.paused ? "paused" : ""}${stale ? " stale" : ""}` },
          h("td", {}, h("strong", {}, c.name), h("div", { class: "dim" }, c.component)),
          h("td", { class: "state" }, c.paused ? `paused${c.stepsPending ? `, ${c.stepsPending} step(s) pending` : ""}` : "running"),
          h("td", { class: "num depth" }, c.depth),
          h("td", { class: "num in-flight" }, c.inFlight),
          h("td", { class: "num waiting" }, c.waiting),
          h("td", { class: "num adds" }, c.adds),
          h("td", { class: "num retries" }, c.retries),
          h("td", { class: "num syncs" }, c.syncs),
          h("td", { class: "num errors" }, c.syncErrors),
          h("td", { class: "keys" }, keys(c.queued)),
          h("td", { class: "keys" }, keys(c.processing)),
          h("td", { class: stale ? "error" : "dim", title: c.reportedAt || "" }, c.reportedAt ? `${age(c.reportedAt, now)} ago` : "never"),
          h("td", { class: "actions" },
            c.paused
              ? [h("button", { "data-action": "step", "data-controller": c.name, title: "let one key through", onclick: () => this.act(c.name, "step") }, "Step"),
                h("button", { "data-action": "resume", "data-controller": c.name, onclick: () => this.act(c.name, "resume") }, "Resume")]
              : h("button", { "data-action": "pause", "data-controller": c.name, title: "the workers stop taking keys; events still queue", onclick: () => this.act(c.name, "pause") }, "Pause")));
      }))));
  }

  async refreshFaults() {
    let items;
    try {
      ({ items } = await getJSON(`${ADMIN}/faults`));
    } catch (e) {
      mount(this.faultsEl, e.code === 404 ? missing("faults") : h("p", { class: "error" }, e.message));
      return;
    }
    if (!items.length) {
      mount(this.faultsEl, h("p", { class: "dim" }, "None. ", h("code", {}, "miniplane fault --help"), " breaks things on purpose."));
      return;
    }
    mount(this.faultsEl, h("ul", { class: "fault-list" }, items.map((f) => {
      const { name, kind, created, ...rest } = f;
      return h("li", { "data-fault": name },
        h("strong", {}, name), " ", h("span", { class: "chip warn" }, kind), " ",
        h("span", { class: "dim" }, Object.entries(rest).map(([k, v]) => `${k}=${v}`).join(" ")), " ",
        h("button", {
          onclick: async () => {
            try {
              await getJSON(`${ADMIN}/faults/${encodeURIComponent(name)}`, { method: "DELETE" });
            } catch (e) {
              mount(this.messageEl, `clear ${name}: ${e.message}`);
            }
            this.refreshFaults();
          },
        }, "Clear"));
    })));
  }

  async refreshLab() {
    let lab;
    try {
      lab = await getJSON(`${ADMIN}/lab`);
    } catch (e) {
      mount(this.labEl, e.code === 404 ? h("p", { class: "dim" }, "No lab is running. ", h("code", {}, "miniplane lab --help"), " lists them.") : h("p", { class: "error" }, e.message));
      return;
    }
    mount(this.labEl, labPanel(lab));
  }
}

/** The lab's title, its current step and the checks run so far, grouped by step. */
export function labPanel(lab) {
  const steps = new Map();
  for (const c of lab.checks || []) (steps.get(c.step) || steps.set(c.step, []).get(c.step)).push(c);
  return h("div", { class: "lab-status", "data-lab": lab.lab },
    h("h3", {}, `${lab.title} `, h("span", { class: "dim" }, `(${lab.lab})`)),
    h("p", {}, lab.done ? h("span", { class: "chip ok" }, "done: every step passed") : [`step ${lab.step} of ${lab.steps}: `, h("strong", {}, lab.stepTitle || "")],
      lab.checkedAt ? h("span", { class: "dim" }, ` · checked ${age(lab.checkedAt)} ago`) : null),
    [...steps.entries()].sort((a, b) => a[0] - b[0]).map(([step, checks]) => h("div", { class: `lab-step${step === lab.step ? " current" : ""}` },
      h("div", { class: "dim" }, `step ${step}`),
      h("ul", {}, checks.map((c) => h("li", { class: c.passed ? "pass" : "fail" },
        h("span", { class: "mark" }, c.passed ? "\u2713" : "\u2717"), ` ${c.description || c.name}`,
        c.message ? h("div", { class: "dim" }, c.message) : null))))));
}
