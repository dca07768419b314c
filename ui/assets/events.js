// The event feed: the cluster's Events (core/v1, as `kubectl get events` lists them), newest
// first: when, type, reason, the object, the message and who reported it.

import { h, age } from "./dom.js";

function when(e) {
  return e.lastTimestamp || e.eventTime || e.firstTimestamp || (e.metadata && e.metadata.creationTimestamp) || "";
}

/** The feed of at most `limit` of `events` (an array of Event objects). */
export function eventFeed(events, limit = 200) {
  // Timestamps have one-second precision: within a second, the later write (the higher
  // resourceVersion) is the newer event.
  const rv = (e) => Number((e.metadata && e.metadata.resourceVersion) || 0);
  const sorted = [...events].sort((a, b) => Date.parse(when(b)) - Date.parse(when(a)) || rv(b) - rv(a)).slice(0, limit);
  if (!sorted.length) return h("p", { class: "empty" }, "No events yet.");
  const now = Date.now();
  return h("ol", { class: "events" }, sorted.map((e) => {
    const io = e.involvedObject || {};
    const source = (e.source && e.source.component) || e.reportingComponent || "";
    return h("li", { class: `event ${e.type === "Warning" ? "warning" : ""}`, "data-reason": e.reason || "" },
      h("span", { class: "ev-age", title: when(e) }, age(when(e), now)),
      h("span", { class: "ev-reason" }, e.reason || ""),
      h("span", { class: "ev-object" }, `${io.kind || ""}/${io.name || ""}`),
      h("span", { class: "ev-msg" }, e.message || "", e.count > 1 ? ` (×${e.count})` : ""),
      h("span", { class: "ev-source" }, source));
  }));
}
