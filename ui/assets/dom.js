// Building DOM without a framework: h("div", {class: "x", onclick: f}, child, "text", ...).
// Text always goes in as text nodes, never as HTML, so object names and messages from the
// API cannot inject markup.

/** Creates an element with attributes (on* keys become listeners) and children. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "style" && typeof v === "object") Object.assign(el.style, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Replaces the children of `el`. */
export function mount(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

/** `850µs`, `12.3ms`, `1.25s`, as `miniplane trace` prints durations. */
export function formatNanos(n) {
  if (n < 1e6) return `${Math.floor(n / 1e3)}µs`;
  if (n < 1e9) return `${(n / 1e6).toFixed(1)}ms`;
  return `${(n / 1e9).toFixed(2)}s`;
}

/** `4s`, `3m`, `2h` since an RFC 3339 time, as kubectl's AGE column. */
export function age(time, now = Date.now()) {
  const t = Date.parse(time);
  if (Number.isNaN(t)) return "";
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

/** `namespace/name` of an object (or `name` when cluster-scoped). */
export function objectKey(o) {
  const m = o.metadata || {};
  return m.namespace ? `${m.namespace}/${m.name}` : m.name;
}

/** The status of a condition of `type` on an object, or undefined. */
export function condition(o, type) {
  return ((o.status && o.status.conditions) || []).find((c) => c.type === type);
}

/**
 * Keeps the elements of the previous draw: `get(key, make)` returns the element made for
 * `key` last time (or makes it), and `done()` ends a draw, forgetting keys it did not use.
 * Keyed by uid and resourceVersion, an unchanged object keeps its element across redraws, so
 * a click on it is never lost to a redraw caused by another object.
 */
export class Keep {
  constructor() {
    this.prev = new Map();
    this.next = new Map();
  }

  get(key, make) {
    let el = this.next.get(key) || this.prev.get(key);
    if (!el) el = make();
    this.next.set(key, el);
    return el;
  }

  done() {
    this.prev = this.next;
    this.next = new Map();
  }
}

/** `uid@resourceVersion`: what an element drawn from an object is kept by. */
export function version(o) {
  return `${o.metadata.uid}@${o.metadata.resourceVersion}`;
}
