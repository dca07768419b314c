// The ownership tree: Deployments → ReplicaSets (with their revision) → Pods, followed
// through metadata.ownerReferences (the controller reference, as the garbage collector and
// `kubectl tree` follow it). Objects no controller owns are listed after the tree.

import { h, condition, Keep } from "./dom.js";
import { podLook } from "./board.js";

/** The "trace" and "history" links, one element per object for as long as it exists. */
const links = new Keep();

/** The API path of `resource` (`deployments`, `replicasets`, `pods`) named as `o`. */
function apiPath(resource, o) {
  const group = resource === "pods" ? "api/v1" : "apis/apps/v1";
  return `${group}/namespaces/${o.metadata.namespace}/${resource}/${o.metadata.name}`;
}

const REVISION = "deployment.kubernetes.io/revision";

function controllerUid(o) {
  const ref = ((o.metadata && o.metadata.ownerReferences) || []).find((r) => r.controller);
  return ref && ref.uid;
}

function traceLink(resource, o) {
  return links.get(`${resource} ${o.metadata.uid}`, () => h("a", { class: "trace-link", href: `#/trace/${resource}/${o.metadata.namespace}/${o.metadata.name}`, title: "the trace that last changed it" }, "trace"));
}

function historyLink(resource, o) {
  return links.get(`history ${resource} ${o.metadata.uid}`, () => h("a", { class: "history-link", href: `#/history/${apiPath(resource, o)}`, title: "every version the store keeps" }, "history"));
}

/** The chip colour of each `podLook` tone. */
const CHIP = { ok: "ok", bad: "bad", warn: "warn", pending: "warn", terminating: "warn", done: "" };

function podLine(p) {
  const look = podLook(p);
  return h("li", { class: "obj pod-obj", "data-name": p.metadata.name, "data-status": look.reason, "data-tone": look.tone },
    h("span", { class: "kind" }, "Pod"), " ", h("span", { class: "name" }, p.metadata.name), " ",
    h("span", { class: `chip ${CHIP[look.tone]}` }, look.isReady ? `${look.reason}, Ready` : look.reason),
    look.restarts ? h("span", { class: "dim" }, look.detail) : null,
    p.spec && p.spec.nodeName ? h("span", { class: "dim" }, ` on ${p.spec.nodeName}`) : h("span", { class: "dim" }, " unscheduled"),
    " ", traceLink("pods", p), " ", historyLink("pods", p));
}

function rsLine(rs, pods) {
  const s = rs.status || {};
  const rev = rs.metadata.annotations && rs.metadata.annotations[REVISION];
  const images = ((rs.spec.template && rs.spec.template.spec && rs.spec.template.spec.containers) || []).map((c) => c.image).join(", ");
  return h("li", { class: "obj rs-obj", "data-name": rs.metadata.name },
    h("span", { class: "kind" }, "ReplicaSet"), " ", h("span", { class: "name" }, rs.metadata.name), " ",
    rev ? h("span", { class: "chip rev" }, `revision ${rev}`) : null, " ",
    h("span", { class: "dim" }, `${s.readyReplicas || 0}/${rs.spec.replicas ?? 0} ready · ${images}`), " ", traceLink("replicasets", rs), " ", historyLink("replicasets", rs),
    pods.length ? h("ul", {}, pods.map(podLine)) : null);
}

function deploymentLine(d, rsets, podsByOwner) {
  const s = d.status || {};
  const conds = ["Available", "Progressing"].map((t) => {
    const c = condition(d, t);
    return c ? h("span", { class: `chip ${c.status === "True" ? "ok" : "bad"}`, title: `${c.reason}: ${c.message}` }, `${t}=${c.status}`) : null;
  });
  return h("li", { class: "obj deploy-obj", "data-name": d.metadata.name },
    h("span", { class: "kind" }, "Deployment"), " ", h("span", { class: "name" }, `${d.metadata.namespace}/${d.metadata.name}`), " ",
    h("span", { class: "dim" }, `${s.availableReplicas || 0}/${d.spec.replicas ?? 1} available, ${s.updatedReplicas || 0} updated`), " ", conds, " ",
    traceLink("deployments", d), " ", historyLink("deployments", d),
    h("ul", {}, rsets.map((rs) => rsLine(rs, podsByOwner.get(rs.metadata.uid) || []))));
}

const newestFirst = (a, b) => Number((b.metadata.annotations || {})[REVISION] || 0) - Number((a.metadata.annotations || {})[REVISION] || 0);
const byKey = (a, b) => `${a.metadata.namespace}/${a.metadata.name}`.localeCompare(`${b.metadata.namespace}/${b.metadata.name}`);

/** The tree of `deployments`, `replicasets` and `pods` (arrays of API objects). */
export function ownershipTree(deployments, replicasets, pods) {
  const podsByOwner = new Map();
  const bare = [];
  for (const p of [...pods].sort(byKey)) {
    const uid = controllerUid(p);
    if (!uid) bare.push(p);
    else (podsByOwner.get(uid) || podsByOwner.set(uid, []).get(uid)).push(p);
  }
  const rsByOwner = new Map();
  const freeRs = [];
  const deployUids = new Set(deployments.map((d) => d.metadata.uid));
  for (const rs of [...replicasets].sort(newestFirst)) {
    const uid = controllerUid(rs);
    if (uid && deployUids.has(uid)) (rsByOwner.get(uid) || rsByOwner.set(uid, []).get(uid)).push(rs);
    else freeRs.push(rs);
  }
  const rsUids = new Set(replicasets.map((r) => r.metadata.uid));
  const strayPods = [...podsByOwner.entries()].filter(([uid]) => !rsUids.has(uid)).flatMap(([, ps]) => ps);
  const parts = [];
  parts.push(h("ul", { class: "tree" }, [...deployments].sort(byKey).map((d) => deploymentLine(d, rsByOwner.get(d.metadata.uid) || [], podsByOwner))));
  if (freeRs.length) parts.push(h("h3", {}, "ReplicaSets without a Deployment"), h("ul", { class: "tree" }, freeRs.map((rs) => rsLine(rs, podsByOwner.get(rs.metadata.uid) || []))));
  if (bare.length || strayPods.length) parts.push(h("h3", {}, "Pods without a ReplicaSet"), h("ul", { class: "tree" }, [...bare, ...strayPods].map(podLine)));
  if (!deployments.length && !replicasets.length && !pods.length) parts.push(h("p", { class: "empty" }, "No Deployments, ReplicaSets or Pods yet. Try kubectl apply -f examples/nginx-deployment.yaml"));
  links.done();
  return h("div", { class: "objects" }, parts);
}
