// The trace view: the recent traces, one trace as a waterfall (the rows, "what and why" and
// delays `miniplane trace` prints, from the collector's `?view=tree`, with runs of retries
// folded into one row that a click opens), a time axis that zooms (Ctrl + wheel, the − + fit
// buttons) and scrolls sideways, a name column as wide as the names, each span's details
// on click, and the replay: a slider over the store revisions the trace's writes produced
// that draws the cluster board as it was at that revision (a LIST of nodes and pods with
// `resourceVersion=N&resourceVersionMatch=Exact`, served from the store's history).

import { h, mount, formatNanos, age } from "./dom.js";
import { getJSON } from "./informer.js";
import { board } from "./board.js";

const COLLECTOR = "/miniplane/v1/traces";
const ANNOTATION = "miniplane.dev/traceparent";
/** Where the UI finds objects a trace can be asked for by name. */
const API_PREFIX = { pods: "/api/v1", nodes: "/api/v1", namespaces: "/api/v1", services: "/api/v1", configmaps: "/api/v1", deployments: "/apis/apps/v1", replicasets: "/apis/apps/v1" };
/** kubectl's short names and kinds of the resources above: `deploy/web` → deployments. */
const ALIASES = {
  po: "pods", pod: "pods", no: "nodes", node: "nodes", ns: "namespaces", namespace: "namespaces",
  svc: "services", service: "services", cm: "configmaps", configmap: "configmaps",
  deploy: "deployments", deployment: "deployments", rs: "replicasets", replicaset: "replicasets",
};
const CLUSTER_SCOPED = new Set(["nodes", "namespaces"]);

/** `deploy/web`, `po/web-abc12`, `node/node-1` or `deployments/default/web` → a route. */
export function objectRoute(text) {
  const parts = text.trim().split("/").filter(Boolean);
  if (parts.length < 2 || parts.length > 3) return null;
  const resource = ALIASES[parts[0].toLowerCase()] || parts[0].toLowerCase();
  if (parts.length === 3) return `#/trace/${resource}/${parts[1]}/${parts[2]}`;
  return CLUSTER_SCOPED.has(resource) ? `#/trace/${resource}/${parts[1]}` : `#/trace/${resource}/default/${parts[1]}`;
}

/** A trace whose last span ended this recently may still grow: reload it. */
const YOUNG_NANOS = 5e9;

function componentClass(c) {
  return `comp-${String(c).replace(/[^a-z0-9-]/gi, "")}`;
}

/** The trace id on an object's annotation, or the latest trace with a request on it. */
async function resolveObject(resource, namespace, name) {
  const prefix = API_PREFIX[resource];
  if (prefix) {
    const path = namespace ? `${prefix}/namespaces/${encodeURIComponent(namespace)}/${resource}/${encodeURIComponent(name)}` : `${prefix}/${resource}/${encodeURIComponent(name)}`;
    try {
      const o = await getJSON(path);
      const tp = o.metadata && o.metadata.annotations && o.metadata.annotations[ANNOTATION];
      const id = tp && tp.split("-")[1];
      if (id) return id;
    } catch (e) {
      if (e.code !== 404) throw e;
    }
  }
  const ref = namespace ? `${resource}/${namespace}/${name}` : `${resource}/${name}`;
  const list = await getJSON(`${COLLECTOR}?limit=1&object=${encodeURIComponent(ref)}`);
  if (!list.traces.length) throw new Error(`no trace touches ${ref} (the collector keeps the recent ones only)`);
  return list.traces[0].traceId;
}

export class TracePage {
  constructor(root) {
    this.root = root;
    this.timers = [];
    this.view = null;
    this.selected = null;
    this.step = null;
    this.snapshots = new Map();
    /** Folds clicked open (by the row of their first attempt), and "every span". */
    this.expanded = new Set();
    this.showAll = false;
    /** The time axis' magnification: 1 fits the pane. */
    this.scale = 1;
    this.layout();
  }

  layout() {
    this.listEl = h("div", { class: "trace-list" });
    this.headEl = h("div", { class: "trace-head" }, h("p", { class: "empty" }, "Pick a trace on the left, or open one from an object's \u201ctrace\u201d link."));
    this.replayEl = h("div", { class: "replay" });
    this.waterfallEl = h("div", { class: "waterfall" });
    this.detailEl = h("div", { class: "span-detail" });
    this.snapshotEl = h("div", { class: "snapshot" });
    mount(this.root,
      h("aside", { class: "trace-side" },
        h("form", { class: "trace-find", onsubmit: (e) => {
          e.preventDefault();
          const input = e.target.elements.object;
          const route = objectRoute(input.value);
          if (route) location.hash = route;
          else input.setCustomValidity("kind/name, e.g. deploy/web, or resource/namespace/name");
          input.reportValidity();
        } }, h("input", { name: "object", placeholder: "deploy/web, po/web-abc12, node/node-1", oninput: (e) => e.target.setCustomValidity(""), "aria-label": "the trace of an object" })),
        h("h2", {}, "Recent traces"), this.listEl),
      h("div", { class: "trace-main" }, this.headEl, this.replayEl,
        h("div", { class: "trace-split" }, this.waterfallEl,
          h("div", { class: "trace-right" }, this.detailEl, this.snapshotEl))));
  }

  /** Shows the page for a route: `[]`, `[traceId]` or `[resource, (namespace,) name]`. */
  async enter(args) {
    this.leave();
    this.pollList();
    if (!args.length) return;
    try {
      let id = args[0];
      if (args.length > 1) {
        const [resource, ns, name] = args.length === 3 ? args : [args[0], null, args[1]];
        mount(this.headEl, h("p", { class: "dim" }, `finding the trace of ${args.join("/")}\u2026`));
        id = await resolveObject(resource, ns, name);
        history.replaceState(null, "", `#/trace/${id}`);
      }
      if (id !== (this.view && this.view.traceId)) {
        this.view = null;
        this.selected = null;
        this.step = null;
        this.expanded = new Set();
        this.scale = 1;
      }
      await this.load(id, this.generation, true);
    } catch (e) {
      mount(this.headEl, h("p", { class: "error" }, e.message));
    }
  }

  leave() {
    for (const t of this.timers) clearTimeout(t);
    this.timers = [];
    this.generation = (this.generation || 0) + 1;
  }

  /** Runs `f` in `ms`, unless the page was left (or another trace opened) since `generation`
   * began, also while a fetch was pending. */
  later(generation, ms, f) {
    if (this.left(generation)) return;
    this.timers.push(setTimeout(() => this.left(generation) || f(), ms));
  }

  left(generation) {
    return generation !== this.generation;
  }

  async pollList(generation = this.generation) {
    try {
      const { traces } = await getJSON(`${COLLECTOR}?limit=30&minSpans=2`);
      const now = Date.now();
      mount(this.listEl, traces.length ? h("ol", {}, traces.map((t) => h("li", {
        class: `trace-item${this.view && this.view.traceId === t.traceId ? " current" : ""}`, "data-trace-id": t.traceId,
        onclick: () => { location.hash = `#/trace/${t.traceId}`; },
      },
      h("div", { class: "ti-root" }, t.rootSummary ? `${t.root}: ${t.rootSummary}` : t.root),
      h("div", { class: "dim" }, `${t.spans} spans · ${formatNanos(t.durationNanos)} · ${age(new Date(t.startUnixNanos / 1e6).toISOString(), now)} ago`)))) : h("p", { class: "empty" }, "No traces yet: apply something."));
    } catch (e) {
      mount(this.listEl, h("p", { class: "error" }, e.message));
    }
    this.later(generation, 3000, () => this.pollList(generation));
  }

  /** Fetches the trace and draws it (again, if it changed or `force`); reloads a young one. */
  async load(id, generation = this.generation, force = false) {
    const view = await getJSON(`${COLLECTOR}/${id}?view=tree`);
    if (this.left(generation)) return;
    const old = this.view;
    const same = old && old.traceId === view.traceId && old.rows.length === view.rows.length && old.endUnixNanos === view.endUnixNanos;
    const young = Date.now() * 1e6 - view.endUnixNanos < YOUNG_NANOS;
    if (young) this.later(generation, 1000, () => this.load(id, generation).catch(() => {}));
    if (same && !force) return;
    const following = !this.view || this.step === null || this.step === this.view.revisions.length - 1;
    this.view = view;
    if (following) this.step = view.revisions.length - 1;
    this.render();
    if (this.step >= 0) this.showRevision(this.step);
  }

  /** The time window drawn: the whole trace, or the zoomed span and what it caused. */
  window() {
    const v = this.view;
    const whole = { from: 0, to: Math.max(1, v.endUnixNanos - v.startUnixNanos) };
    const z = this.zoom;
    return z && z.traceId === v.traceId ? { from: z.from, to: Math.max(z.from + 1, z.to) } : whole;
  }

  /** Zooms the time axis to row `i` and its descendants (a contiguous run in pre-order). */
  zoomTo(i) {
    const rows = this.view.rows;
    let to = rows[i].offsetNanos + rows[i].durationNanos;
    for (let j = i + 1; j < rows.length && rows[j].depth > rows[i].depth; j++) to = Math.max(to, rows[j].offsetNanos + rows[j].durationNanos);
    this.zoom = { traceId: this.view.traceId, from: rows[i].offsetNanos, to, row: i };
    this.render();
  }

  /** The rows drawn, in order: `{ row, depth, fold, unfolded }`. By default the view's
   * `folded` rows (runs of retries as one row each, as `miniplane trace` prints them); a
   * fold that was clicked open is followed by the rows it hides. */
  shownRows() {
    const v = this.view;
    if (this.showAll || !v.folded || !v.folded.length) return v.rows.map((r, i) => ({ row: i, depth: r.depth }));
    const out = [];
    for (const f of v.folded) {
      out.push({ row: f.row, depth: f.depth, fold: f.fold });
      if (f.fold && this.expanded.has(f.row)) {
        const base = v.rows[f.fold.rows[0]].depth;
        for (const r of f.fold.rows) out.push({ row: r, depth: f.depth + 1 + v.rows[r].depth - base, unfolded: true });
      }
    }
    return out;
  }

  /** Sets the time axis' magnification (1: the window fits the pane), keeping the time under
   * `anchorX` (a pixel offset in the pane, default its middle) where it was. */
  setScale(scale, anchorX) {
    const pane = this.waterfallEl;
    const old = this.scale || 1;
    this.scale = Math.min(256, Math.max(1, scale));
    const labelW = this.labelWidth || 0;
    const x = anchorX ?? pane.clientWidth / 2;
    const trackX = pane.scrollLeft + x - labelW;
    this.applyWidths();
    pane.scrollLeft = Math.max(0, (trackX * this.scale) / old - x + labelW);
    if (this.zoomLabel) this.zoomLabel.textContent = `${Math.round(this.scale * 100)}%`;
  }

  /** The name column as wide as the widest indented name (plus room for the summary), the
   * track the pane's remaining width times the scale: the pane scrolls sideways. */
  applyWidths() {
    const pane = this.waterfallEl;
    const trackW = Math.max(300, pane.clientWidth - this.labelWidth - 2) * (this.scale || 1);
    pane.style.setProperty("--label-w", `${this.labelWidth}px`);
    pane.style.setProperty("--track-w", `${Math.round(trackW)}px`);
  }

  render() {
    const v = this.view;
    const { from, to } = this.window();
    const span = to - from;
    const folds = (v.folded || []).filter((f) => f.fold).length;
    mount(this.headEl,
      h("div", { class: "trace-title" }, v.header),
      v.cut && h("div", { class: "trace-cut" }, "cut: this trace reached the span budget per trace (--trace-max-spans-per-trace); its later steps were not recorded"),
      h("div", { class: "dim" }, "the same trace in a terminal: ", h("code", {}, `miniplane trace --id ${v.traceId}`), " · ",
        h("a", { href: `${COLLECTOR}/${v.traceId}`, target: "_blank" }, "spans as JSON"), " · ",
        folds ? [h("label", { class: "show-all" }, h("input", { type: "checkbox", checked: !!this.showAll, onchange: (e) => { this.showAll = e.target.checked; this.render(); } }),
          ` every span (${folds} run${folds === 1 ? "" : "s"} of retries folded)`), " · "] : null,
        ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"].map((c) => h("span", { class: "legend" }, h("span", { class: `dot ${componentClass(c)}` }), c))));
    const marker = h("div", { class: "wf-marker" });
    this.marker = marker;
    this.rowEls = [];
    const rowEls = this.shownRows().map(({ row: i, depth, fold, unfolded }) => {
      const row = v.rows[i];
      const s = row.span;
      const left = ((row.offsetNanos - from) / span) * 100;
      const width = Math.max(0.15, (row.durationNanos / span) * 100);
      const visible = left + width >= 0 && left <= 100;
      const open = fold && this.expanded.has(i);
      const el = h("div", {
        class: `wf-row${row.orphan ? " orphan" : ""}${this.selected === i ? " selected" : ""}${visible ? "" : " outside"}${fold ? " fold" : ""}${open ? " open" : ""}${unfolded ? " unfolded" : ""}`,
        "data-row": i, "data-name": s.name, "data-component": s.component,
        title: `${row.line}${fold ? ` ${fold.label}` : ""}${row.delay ? ` (${row.delay})` : ""}`,
        onclick: () => {
          if (fold) {
            if (open) this.expanded.delete(i);
            else this.expanded.add(i);
            this.selected = i;
            this.render();
          } else this.select(i);
        },
      },
      // Deep trees keep some room for the text: the indent stops growing at depth 24.
      h("div", { class: "wf-label", style: { paddingLeft: `${4 + Math.min(depth, 24) * 7}px` } },
        h("span", { class: `dot ${componentClass(s.component)}` }), h("span", { class: "wf-name" }, s.name),
        fold ? h("span", { class: "wf-fold", title: open ? "click to fold" : "click to show every attempt" }, `${open ? "\u25be" : "\u25b8"} ${fold.label}`) : null,
        s.summary ? h("span", { class: "wf-summary" }, ` ${s.summary}`) : null),
      h("div", { class: "wf-track" }, visible ? [
        h("div", { class: `wf-bar ${componentClass(s.component)}`, style: { left: `${Math.max(0, left)}%`, width: `${Math.min(width, 100 - Math.max(0, left))}%` } }),
        // The duration after the bar, or before it when the bar ends near the right edge.
        left + width < 85
          ? h("span", { class: "wf-dur", style: { left: `${Math.max(0, left) + width}%` } }, formatNanos(row.durationNanos))
          : h("span", { class: "wf-dur before", style: { right: `${100 - Math.max(0, left)}%` } }, formatNanos(row.durationNanos))] : null));
      this.rowEls[i] = el;
      return el;
    });
    const zoomed = from > 0 || to < v.endUnixNanos - v.startUnixNanos;
    this.zoomLabel = h("span", { class: "wf-scale" }, `${Math.round((this.scale || 1) * 100)}%`);
    mount(this.waterfallEl,
      h("div", { class: "wf-axis" }, h("div", { class: "wf-label" }, "span: what and why",
        h("span", { class: "wf-zoom" },
          h("button", { class: "wf-zoom-out", title: "zoom out the time axis (Ctrl + wheel)", onclick: (e) => { e.stopPropagation(); this.setScale((this.scale || 1) / 1.5); } }, "\u2212"),
          this.zoomLabel,
          h("button", { class: "wf-zoom-in", title: "zoom in the time axis (Ctrl + wheel)", onclick: (e) => { e.stopPropagation(); this.setScale((this.scale || 1) * 1.5); } }, "+"),
          h("button", { class: "wf-zoom-reset", title: "fit the time axis to the pane", onclick: (e) => { e.stopPropagation(); this.setScale(1); } }, "fit"))),
      h("div", { class: "wf-track" }, h("span", {}, `+${formatNanos(from)}`),
        zoomed ? h("button", { class: "wf-unzoom", onclick: () => { this.zoom = null; this.render(); } }, "whole trace") : null,
        h("span", { class: "wf-total" }, `+${formatNanos(to)}`), marker)),
      rowEls);
    // The name column fits the widest name at its indent, plus room for the summary.
    let widest = 0;
    for (const el of rowEls) {
      const label = el.firstChild;
      const name = label.querySelector(".wf-name");
      const fold = label.querySelector(".wf-fold");
      // Rectangles, not offsets: the (sticky) label is the name's offset parent.
      const end = (fold || name).getBoundingClientRect().right;
      widest = Math.max(widest, end - label.getBoundingClientRect().left);
    }
    // Never narrower than the names; up to about half the pane for the summaries.
    this.labelWidth = Math.ceil(Math.max(widest + 40, Math.min(widest + 360, this.waterfallEl.clientWidth * 0.55)));
    this.applyWidths();
    this.waterfallEl.onwheel = (e) => {
      if (!e.ctrlKey && !e.metaKey) return;
      e.preventDefault();
      const x = e.clientX - this.waterfallEl.getBoundingClientRect().left;
      this.setScale((this.scale || 1) * (e.deltaY < 0 ? 1.25 : 0.8), x);
    };
    this.renderReplay();
    if (this.selected !== null && this.rowEls[this.selected]) this.select(this.selected, false);
  }

  select(i, scroll = true) {
    const v = this.view;
    const row = v.rows[i];
    if (!row) return;
    if (!this.rowEls[i]) {
      // Hidden in a fold: open it.
      const f = (v.folded || []).find((x) => x.fold && x.fold.rows.includes(i));
      if (!f) return;
      this.expanded.add(f.row);
      this.render();
      if (!this.rowEls[i]) return;
    }
    if (this.selected !== null && this.rowEls[this.selected]) this.rowEls[this.selected].classList.remove("selected");
    this.selected = i;
    this.rowEls[i].classList.add("selected");
    if (scroll) this.rowEls[i].scrollIntoView({ block: "nearest" });
    const s = row.span;
    const attrs = Object.entries(s.attributes || {});
    const revIndex = v.revisions.findIndex((m) => m.row === i);
    mount(this.detailEl,
      h("h3", {}, s.name, " ", h("span", { class: `chip ${componentClass(s.component)}` }, s.component)),
      h("p", { class: "what" }, row.line, row.delay ? h("span", { class: "dim" }, ` (${row.delay})`) : null),
      h("dl", {},
        h("dt", {}, "start"), h("dd", {}, `+${formatNanos(row.offsetNanos)} from the trace's start`),
        h("dt", {}, "duration"), h("dd", {}, formatNanos(row.durationNanos)),
        h("dt", {}, "kind"), h("dd", {}, s.kind),
        h("dt", {}, "caused by"), h("dd", {}, row.parentRow !== null && row.parentRow !== undefined
          ? h("a", { href: "#", onclick: (e) => { e.preventDefault(); this.select(row.parentRow); } }, v.rows[row.parentRow].span.name)
          : row.orphan ? "a span that was not recorded" : "nothing: it started the trace"),
        attrs.map(([k, val]) => [h("dt", {}, k), h("dd", {}, String(val))]),
        (s.links || []).length ? [h("dt", {}, "links"), h("dd", {}, s.links.map((l) => h("div", {},
          l.traceId === v.traceId ? `span ${l.spanId}` : h("a", { href: `#/trace/${l.traceId}` }, `trace ${l.traceId}`))))] : null,
        h("dt", {}, "span id"), h("dd", {}, h("code", {}, s.spanId))),
      h("div", { class: "detail-actions" },
        revIndex >= 0 ? h("button", { class: "show-revision", onclick: () => this.setStep(revIndex) }, `show the cluster at revision ${v.revisions[revIndex].revision}`) : null,
        h("button", { class: "zoom", title: "fit the time axis to this span and what it caused", onclick: () => this.zoomTo(i) }, "zoom to what it caused")));
  }

  renderReplay() {
    const marks = this.view.revisions;
    if (!marks.length) {
      mount(this.replayEl, h("span", { class: "dim" }, "No write of this trace produced a revision: nothing to replay."));
      return;
    }
    this.slider = h("input", { type: "range", class: "replay-slider", min: 0, max: marks.length - 1, step: 1, value: this.step, oninput: (e) => this.setStep(Number(e.target.value)) });
    this.stepLabel = h("span", { class: "replay-label" });
    mount(this.replayEl,
      h("span", { class: "replay-title" }, "Replay"),
      h("button", { title: "previous write", onclick: () => this.setStep(Math.max(0, this.step - 1)) }, "\u25c0"),
      this.slider,
      h("button", { title: "next write", onclick: () => this.setStep(Math.min(marks.length - 1, this.step + 1)) }, "\u25b6"),
      this.stepLabel);
    this.updateStepLabel();
  }

  updateStepLabel() {
    const v = this.view;
    const m = v.revisions[this.step];
    if (!m) return;
    const { from, to } = this.window();
    const at = ((m.atNanos - from) / (to - from)) * 100;
    this.marker.style.left = `${at}%`;
    this.marker.hidden = at < 0 || at > 100;
    mount(this.stepLabel, `write ${this.step + 1} of ${v.revisions.length} · revision ${m.revision} · +${formatNanos(m.atNanos)} · ${v.rows[m.row].line}`);
  }

  setStep(i) {
    this.step = i;
    if (this.slider) this.slider.value = String(i);
    this.updateStepLabel();
    this.showRevision(i);
  }

  /** Draws the board as it was at the step's revision (debounced: a dragged slider asks once). */
  showRevision(i) {
    clearTimeout(this.revTimer);
    this.revTimer = setTimeout(async () => {
      const m = this.view && this.view.revisions[i];
      if (!m) return;
      for (const el of this.rowEls) if (el) el.classList.remove("at-step");
      if (this.rowEls[m.row]) this.rowEls[m.row].classList.add("at-step");
      try {
        let snap = this.snapshots.get(m.revision);
        if (!snap) {
          const q = `?resourceVersion=${m.revision}&resourceVersionMatch=Exact`;
          const [nodes, pods] = await Promise.all([getJSON(`/api/v1/nodes${q}`), getJSON(`/api/v1/pods${q}`)]);
          snap = { nodes: nodes.items, pods: pods.items };
          this.snapshots.set(m.revision, snap);
        }
        if (this.step !== i) return;
        mount(this.snapshotEl, h("h3", {}, `The cluster at revision ${m.revision}`), h("div", { class: "compact", "data-revision": m.revision }, board(snap.nodes, snap.pods)));
      } catch (e) {
        mount(this.snapshotEl, h("h3", {}, `The cluster at revision ${m.revision}`),
          h("p", { class: "error" }, e.code === 410 ? "That revision was compacted: the store keeps about five minutes of history." : e.message));
      }
    }, 80);
  }
}
