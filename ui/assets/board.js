// The cluster board: one column per node (its conditions and taints), the pods bound to it
// as cards colored by what kubectl's STATUS column would say (`podLook`: green only when
// Running and Ready, red when crash-looping or failing), solid when Ready, dashed while not; a first column for pods no
// node has yet (the scheduler's queue). Drawn from a list of nodes and pods, live or as they
// were at an old revision (the trace replay).

import { h, condition, Keep, version } from "./dom.js";

/** The live board's cards and node headers, kept while their object is unchanged. */
const live = new Keep();

/** Which conditions are shown when they are not in their healthy state. */
const HEALTHY = { Ready: "True", MemoryPressure: "False", DiskPressure: "False", PIDPressure: "False", NetworkUnavailable: "False" };

function nodeHeader(node) {
  const ready = condition(node, "Ready");
  const readyState = ready ? (ready.status === "True" ? "ok" : ready.status === "False" ? "bad" : "unknown") : "unknown";
  const badges = [h("span", { class: `badge ${readyState}`, title: ready ? `${ready.reason || ""}: ${ready.message || ""}` : "no Ready condition" },
    !ready ? "Ready?" : ready.status === "True" ? "Ready" : `Ready=${ready.status}`)];
  for (const c of (node.status && node.status.conditions) || []) {
    if (c.type !== "Ready" && HEALTHY[c.type] && c.status !== HEALTHY[c.type]) {
      badges.push(h("span", { class: "badge bad", title: c.message || "" }, `${c.type}=${c.status}`));
    }
  }
  if (node.spec && node.spec.unschedulable) badges.push(h("span", { class: "badge warn" }, "SchedulingDisabled"));
  const taints = ((node.spec && node.spec.taints) || []).map((t) =>
    h("div", { class: "taint", title: "taint" }, `${t.key}${t.value ? "=" + t.value : ""}:${t.effect}`));
  return h("div", { class: "node-head" }, h("div", { class: "node-name" }, node.metadata.name), h("div", { class: "badges" }, badges), taints);
}

/** Container states kubectl's STATUS column shows for a pod that is failing. */
const FAILING = new Set(["CrashLoopBackOff", "Error", "ErrImagePull", "ImagePullBackOff", "InvalidImageName",
  "CreateContainerConfigError", "CreateContainerError", "RunContainerError", "OOMKilled", "ContainerCannotRun"]);
/** Reasons of a pod on its way to running. */
const STARTING = new Set(["Pending", "ContainerCreating", "PodInitializing"]);

/** What a pod card says and how it is drawn: kubectl's STATUS column (`printPod`: the pod's
 * reason, else the last container's waiting or terminated reason, `ExitCode:N` or
 * `Signal:N`, `Terminating` once deleted) and a tone for its colour:
 * `bad` (red: crash-looping, failing, failed), `warn` (amber: restarted after a non-zero
 * exit and not Ready, or Running not Ready), `pending` (yellow: Pending, ContainerCreating),
 * `terminating` (grey-violet), `done` (grey: Succeeded, Completed), `ok` (green: Running,
 * Ready). Never green for a pod that is not Ready. */
export function podLook(pod) {
  const status = pod.status || {};
  const ready = condition(pod, "Ready");
  const isReady = !!ready && ready.status === "True";
  const containers = status.containerStatuses || [];
  const restarts = containers.reduce((n, c) => n + (c.restartCount || 0), 0);
  let reason = status.reason || status.phase || "Pending";
  if (!status.reason) {
    for (const cs of [...containers].reverse()) {
      const st = cs.state || {};
      if (st.waiting && st.waiting.reason) reason = st.waiting.reason;
      else if (st.terminated) {
        const t = st.terminated;
        reason = t.reason || (t.signal ? `Signal:${t.signal}` : `ExitCode:${t.exitCode}`);
      } else continue;
      break;
    }
  }
  if (reason === "Pending" && pod.spec && pod.spec.nodeName && containers.length) reason = "ContainerCreating";
  // A container that exited with an error and was restarted, not Ready again yet.
  const lastFailed = containers.find((c) => (c.restartCount || 0) > 0 && c.lastState && c.lastState.terminated
    && c.lastState.terminated.exitCode !== 0);
  let tone;
  if (pod.metadata.deletionTimestamp) {
    reason = "Terminating";
    tone = "terminating";
  } else if (FAILING.has(reason) || /^(ExitCode|Signal):/.test(reason) || status.phase === "Failed") tone = "bad";
  else if (status.phase === "Succeeded" || reason === "Completed") tone = "done";
  else if (STARTING.has(reason)) tone = "pending";
  else if (lastFailed && !isReady) tone = "bad";
  else tone = isReady ? "ok" : "warn";
  let detail = "";
  if (restarts) {
    const last = lastFailed && lastFailed.lastState.terminated;
    detail = ` · ${restarts} restart${restarts === 1 ? "" : "s"}${last ? ` (last: ${last.reason || "exit"} ${last.exitCode})` : ""}`;
  }
  return { reason, tone, isReady, restarts, detail };
}

/** One pod card; with `link`, a click opens the pod's trace. */
export function podCard(pod, link) {
  const phase = (pod.status && pod.status.phase) || "Pending";
  const look = podLook(pod);
  const containers = (pod.status && pod.status.containerStatuses) || [];
  const readyCount = containers.filter((c) => c.ready).length;
  const total = (pod.spec && pod.spec.containers && pod.spec.containers.length) || containers.length;
  return h("div", {
    class: `pod phase-${phase} tone-${look.tone}${look.isReady ? " ready" : ""}${pod.metadata.deletionTimestamp ? " terminating" : ""}`,
    "data-name": pod.metadata.name,
    "data-namespace": pod.metadata.namespace,
    "data-phase": phase,
    "data-ready": String(look.isReady),
    "data-status": look.reason,
    "data-tone": look.tone,
    title: `${pod.metadata.namespace}/${pod.metadata.name}\nphase ${phase}, ${look.reason}${look.detail}${pod.status && pod.status.podIP ? "\nIP " + pod.status.podIP : ""}${link ? "\nclick: its trace" : ""}`,
    onclick: link ? () => { location.hash = `#/trace/pods/${pod.metadata.namespace}/${pod.metadata.name}`; } : undefined,
  },
  h("div", { class: "pod-name" }, pod.metadata.name),
  h("div", { class: "pod-meta" }, h("span", { class: "pod-status" }, look.reason), ` · ${readyCount}/${total}${look.detail}`, pod.metadata.namespace !== "default" ? ` · ${pod.metadata.namespace}` : ""));
}

const byName = (a, b) => (a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0);

/** The board for `nodes` and `pods` (arrays of API objects); `link`: cards open traces. */
export function board(nodes, pods, link = false) {
  const card = (p) => (link ? live.get(`pod ${version(p)}`, () => podCard(p, true)) : podCard(p, false));
  const head = (n) => (link ? live.get(`node ${version(n)}`, () => nodeHeader(n)) : nodeHeader(n));
  const columns = new Map();
  const unscheduled = [];
  for (const n of [...nodes].sort(byName)) columns.set(n.metadata.name, { node: n, pods: [] });
  for (const p of [...pods].sort(byName)) {
    const nodeName = p.spec && p.spec.nodeName;
    if (!nodeName) unscheduled.push(p);
    else {
      if (!columns.has(nodeName)) columns.set(nodeName, { node: null, name: nodeName, pods: [] });
      columns.get(nodeName).pods.push(p);
    }
  }
  const cols = [];
  if (unscheduled.length) {
    cols.push(h("section", { class: "node-col unscheduled", "data-node": "" },
      h("div", { class: "node-head" }, h("div", { class: "node-name" }, "not scheduled"), h("div", { class: "badges" }, h("span", { class: "badge warn" }, `${unscheduled.length} pending`))),
      h("div", { class: "pods" }, unscheduled.map(card))));
  }
  for (const [name, col] of columns) {
    cols.push(h("section", { class: "node-col", "data-node": name },
      col.node ? head(col.node) : h("div", { class: "node-head" }, h("div", { class: "node-name" }, name), h("span", { class: "badge unknown" }, "no Node object")),
      h("div", { class: "pods" }, col.pods.map(card))));
  }
  if (!cols.length) cols.push(h("p", { class: "empty" }, "No nodes and no pods."));
  if (link) live.done();
  return h("div", { class: "board" }, cols);
}
