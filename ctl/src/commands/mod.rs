//! miniplane's own verbs, which no single Kubernetes component has: `up` (a whole cluster,
//! as kind's `create cluster`), `kubeconfig`, `trace` (what a write set in motion), `fault`
//! (injecting failures, `docs/faults.md`), `lab` (the teaching labs, `docs/labs.md`),
//! `cloud` (the simulated cloud under the cluster, `docs/cloud.md`), `load` (the simulated
//! usage of a workload's pods, for `kubectl top` and the HPA), `snapshot` (a cluster's
//! objects saved at one revision and restored), `clock` (the cluster's virtual clock) and
//! `record`/`replay` (a period's writes kept, and its clients' writes sent to a new cluster).
//! The kubectl-like verbs are in `kubectl/`; the components' own subcommands in `components/`.

pub(crate) mod clock;
pub(crate) mod cloud;
pub(crate) mod fault;
pub(crate) mod kubeconfig;
pub(crate) mod lab;
pub(crate) mod load;
pub(crate) mod record;
pub(crate) mod replay;
pub(crate) mod snapshot;
pub(crate) mod trace;
pub(crate) mod up;
