// One object's history (`#/history/{API path of the object}`, e.g.
// `#/history/apis/apps/v1/namespaces/default/deployments/web`): every version the store keeps,
// from the admin API's `GET /miniplane/v1/history/...` (docs/faults.md, "Object history"),
// as `miniplane history` prints it: revision, change, writer, user, component, trace link, and the
// fields each change touched. The slider replays the object: the version at any kept revision.

import { h, mount } from "./dom.js";
import { getJSON } from "./informer.js";

/** A value as one line of JSON, cut at 80 characters. */
function oneLine(v) {
  if (v === undefined) return "<none>";
  const text = JSON.stringify(v);
  return text.length > 80 ? `${text.slice(0, 79)}…` : text;
}

function writer(e) {
  // No entry moved: the manager changed only fields it owned already (see `miniplane history`).
  if (!e.manager) return e.type === "Deleted" ? "not recorded" : e.beforeCompaction ? "unknown" : "owned fields";
  const detail = [e.operation, e.subresource].filter(Boolean).join(" ");
  return detail ? `${e.manager} (${detail})` : e.manager;
}

function traceLink(e) {
  const parts = (e.traceparent || "").split("-");
  if (parts.length !== 4) return h("span", { class: "dim" }, "no trace");
  return h("a", { class: "trace-link", href: `#/trace/${parts[1]}`, title: e.traceparent }, `${parts[1].slice(0, 8)}…`);
}

function row(e, onPick) {
  const change = e.beforeCompaction ? `${e.type} (before the cut)` : e.type;
  return h("li", { class: `hist-row ${e.type.toLowerCase()}`, "data-revision": e.revision, "data-type": e.type },
    h("button", { class: "hist-rev", title: "show the object at this revision", onclick: () => onPick(e.revision) }, String(e.revision)),
    h("span", { class: "hist-change" }, change),
    h("span", { class: "hist-writer" }, writer(e)),
    h("span", { class: "hist-user dim" }, e.user || ""),
    h("span", { class: "dim" }, e.component || ""),
    traceLink(e),
    e.diff.length ? h("ul", { class: "hist-diff" }, e.diff.map((c) =>
      h("li", { "data-path": c.path }, h("code", {}, c.path), ": ", oneLine(c.old), " → ", oneLine(c.new)))) : null);
}

export class HistoryPage {
  constructor(el) {
    this.el = el;
    this.path = null;
  }

  leave() {}

  /** Shows the history of the object at `parts` (the segments of its API path). */
  async enter(parts) {
    this.path = parts.join("/");
    if (!this.path) {
      mount(this.el, h("p", { class: "empty" }, "Open an object's history from its \"history\" link in Objects."));
      return;
    }
    mount(this.el, h("p", { class: "dim" }, "loading…"));
    let found;
    try {
      found = await getJSON(`/miniplane/v1/history/${this.path}`);
    } catch (err) {
      mount(this.el, h("p", { class: "error" }, `No history: ${err.message}`));
      return;
    }
    this.draw(found);
  }

  draw(found) {
    const place = found.namespace ? `${found.namespace}/` : "";
    const versions = found.revisions;
    const object = h("pre", { class: "hist-object" });
    const label = h("span", { class: "hist-at" });
    const slider = h("input", { type: "range", class: "hist-slider", min: 0, max: Math.max(0, versions.length - 1), value: Math.max(0, versions.length - 1) });
    const show = (i) => {
      const e = versions[i];
      if (!e) return;
      slider.value = String(i);
      label.textContent = `revision ${e.revision}: ${e.type.toLowerCase()}`;
      object.dataset.revision = String(e.revision);
      object.textContent = e.object ? JSON.stringify(e.object, (k, v) => (k === "managedFields" ? undefined : v), 2) : "(deleted)";
      for (const r of this.el.querySelectorAll(".hist-row")) r.classList.toggle("picked", r.dataset.revision === String(e.revision));
    };
    slider.addEventListener("input", () => show(Number(slider.value)));
    const pick = (revision) => show(versions.findIndex((e) => e.revision === revision));
    const cut = versions.length && versions[0].beforeCompaction
      ? ` Older changes were compacted: the store keeps revisions from ${found.compactedRevision} on.` : "";
    mount(this.el,
      h("h2", { class: "hist-title" }, `${found.resource} ${place}${found.name}`),
      h("p", { class: "summary" }, `${versions.length} versions kept, store at revision ${found.currentRevision}.${cut}`),
      h("ol", { class: "hist-rows" }, versions.map((e) => row(e, pick))),
      h("div", { class: "hist-replay" }, h("label", {}, "replay ", slider), " ", label),
      object);
    show(versions.length - 1);
  }
}
