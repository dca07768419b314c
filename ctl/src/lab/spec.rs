//! The lab format: `labs/<nn-name>/lab.yaml`, written by a teacher without Rust.
//!
//! ```yaml
//! title: The workqueue
//! titleKo: 워크큐
//! cluster: {nodes: 2, fastNodeLifecycle: false, secure: false}
//! setup:                          # run by `lab start` (and `reset`) on a fresh cluster
//!   - fault: {kind: PauseController, controller: deployment}
//! steps:
//!   - title: Pile up changes
//!     task: Scale deployment web to 3, then to 5, while the controller is paused.
//!     checks:
//!       - name: five
//!         description: deployment web asks for 5 replicas
//!         object: {kind: Deployment, name: web, fields: {spec.replicas: 5}}
//!     hints: ["miniplane scale deployment web --replicas 5"]
//!     solution:
//!       - run: miniplane scale deployment web --replicas 5
//! ```
//!
//! Check kinds are [`Check`]'s variants (one key each); actions are [`Action`]'s. Unknown
//! keys are refused, so a typo in a lab fails its CI test instead of making a check vacuous.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use admin::FaultSpec;

pub use super::cluster::ClusterSpec;
use serde::Deserialize;
use serde_json::Value;

/// A lab as written in its `lab.yaml`, plus where it lives.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Lab {
    /// Directory name (`03-workqueue`); set on load.
    #[serde(skip)]
    pub name: String,
    /// The lab's directory; set on load.
    #[serde(skip)]
    pub dir: PathBuf,
    /// Title.
    pub title: String,
    /// Korean title.
    #[serde(default)]
    pub title_ko: Option<String>,
    /// The cluster it needs.
    #[serde(default)]
    pub cluster: ClusterSpec,
    /// Actions run once the cluster is up (may leave it broken on purpose).
    #[serde(default)]
    pub setup: Vec<Action>,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

/// One step: what to do, how it is checked, hints, and the solution.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Step {
    /// Title.
    pub title: String,
    /// Korean title.
    #[serde(default)]
    pub title_ko: Option<String>,
    /// What the student does (one paragraph; the README tells the story).
    pub task: String,
    /// Korean task.
    #[serde(default)]
    pub task_ko: Option<String>,
    /// All must pass for the step to be done.
    pub checks: Vec<CheckSpec>,
    /// Shown one at a time by `lab hint`.
    #[serde(default)]
    pub hints: Vec<String>,
    /// Korean hints (same order).
    #[serde(default)]
    pub hints_ko: Vec<String>,
    /// What `lab solve` does.
    pub solution: Vec<Action>,
}

/// A named check.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckSpec {
    /// Unique within its step.
    pub name: String,
    /// What it asserts, in words.
    pub description: String,
    /// What is checked.
    #[serde(flatten)]
    pub check: Check,
}

/// What a check asserts. State checks read objects; history checks read the trace collector
/// and the events.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Check {
    /// An object exists (or not) with these field values.
    Object(ObjectCheck),
    /// How many objects match.
    Count(CountCheck),
    /// An object's status condition.
    Condition(ConditionCheck),
    /// An Event was recorded.
    Event(EventCheck),
    /// A controller's work queue (admin API).
    Controller(ControllerCheck),
    /// A fault is (or is not) in force.
    Fault(FaultCheck),
    /// Writes the API server served, from the trace: who made them, how many.
    Writes(WritesCheck),
    /// The most objects that existed at once, from the trace's creates and deletes.
    MaxAlive(MaxAliveCheck),
    /// A span some component reported, e.g. the scheduler's filter verdict for a node.
    Span(SpanCheck),
    /// What a user may and may not do, as RBAC answers it (a SubjectAccessReview, the question
    /// `kubectl auth can-i` asks).
    Access(AccessCheck),
}

/// Which object(s) of which kind.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Target {
    /// Kind: Pod, Deployment, ReplicaSet, Node, Event, ConfigMap, Service, Namespace, Lease,
    /// ServiceAccount, Secret, Role, RoleBinding, ClusterRole, ClusterRoleBinding.
    pub kind: String,
    /// Namespace (default `default` for namespaced kinds).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// See [`Check::Object`].
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectCheck {
    /// Kind.
    pub kind: String,
    /// API version of a kind outside the built-in table (a custom resource:
    /// `demo.miniplane.dev/v1`).
    #[serde(default)]
    pub api_version: Option<String>,
    /// Its resource (plural) when `apiVersion` is given (default: the kind, lowercased, + s).
    #[serde(default)]
    pub resource: Option<String>,
    /// Whether it is namespaced when `apiVersion` is given (default: yes).
    #[serde(default)]
    pub namespaced: Option<bool>,
    /// Name.
    pub name: String,
    /// Namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// `path: value`; paths as in [`super::path`].
    #[serde(default)]
    pub fields: BTreeMap<String, Value>,
    /// `false`: the object must not exist.
    #[serde(default = "yes")]
    pub exists: bool,
}

fn yes() -> bool {
    true
}

/// See [`Check::Count`].
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CountCheck {
    /// Kind.
    pub kind: String,
    /// API version of a kind outside the built-in table (a custom resource:
    /// `demo.miniplane.dev/v1`).
    #[serde(default)]
    pub api_version: Option<String>,
    /// Its resource (plural) when `apiVersion` is given (default: the kind, lowercased, + s).
    #[serde(default)]
    pub resource: Option<String>,
    /// Whether it is namespaced when `apiVersion` is given (default: yes).
    #[serde(default)]
    pub namespaced: Option<bool>,
    /// Namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Label selector (`app=web`, `app=web,tier!=db`).
    #[serde(default)]
    pub selector: Option<String>,
    /// Name prefix.
    #[serde(default)]
    pub name_prefix: Option<String>,
    /// Field values every counted object has.
    #[serde(default)]
    pub fields: BTreeMap<String, Value>,
    /// Counted objects' controller owner kind; `none` for objects without a controller.
    #[serde(default)]
    pub owner: Option<String>,
    /// Count objects being deleted too (default: no).
    #[serde(default)]
    pub terminating: bool,
    /// Exactly this many.
    #[serde(default)]
    pub equals: Option<usize>,
    /// At least.
    #[serde(default)]
    pub min: Option<usize>,
    /// At most.
    #[serde(default)]
    pub max: Option<usize>,
}

/// See [`Check::Condition`].
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConditionCheck {
    /// Kind.
    pub kind: String,
    /// API version of a kind outside the built-in table (a custom resource:
    /// `demo.miniplane.dev/v1`).
    #[serde(default)]
    pub api_version: Option<String>,
    /// Its resource (plural) when `apiVersion` is given (default: the kind, lowercased, + s).
    #[serde(default)]
    pub resource: Option<String>,
    /// Whether it is namespaced when `apiVersion` is given (default: yes).
    #[serde(default)]
    pub namespaced: Option<bool>,
    /// Name.
    pub name: String,
    /// Namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Condition type (`Ready`, `Available`, `PodScheduled`).
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Its reason, if it matters.
    #[serde(default)]
    pub reason: Option<String>,
}

/// See [`Check::Event`].
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventCheck {
    /// Event reason (`FailedScheduling`, `ScalingReplicaSet`).
    pub reason: String,
    /// Kind of the involved object.
    #[serde(default)]
    pub kind: Option<String>,
    /// Name prefix of the involved object.
    #[serde(default)]
    pub name_prefix: Option<String>,
    /// Text the message contains.
    #[serde(default)]
    pub message_contains: Option<String>,
    /// At least this many such events (default 1).
    #[serde(default)]
    pub min: Option<usize>,
}

/// See [`Check::Controller`].
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ControllerCheck {
    /// Controller (`deployment`).
    pub name: String,
    /// Paused or not.
    #[serde(default)]
    pub paused: Option<bool>,
    /// At least this many keys waiting in its queue.
    #[serde(default)]
    pub min_depth: Option<u64>,
    /// At most this many keys waiting.
    #[serde(default)]
    pub max_depth: Option<u64>,
    /// A key waiting in its queue (`default/web`).
    #[serde(default)]
    pub queued: Option<String>,
}

/// See [`Check::Fault`].
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultCheck {
    /// The fault's name.
    pub name: String,
    /// Whether it must be in force (default) or cleared.
    #[serde(default = "yes")]
    pub present: bool,
}

/// See [`Check::Writes`].
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WritesCheck {
    /// Resource (plural): `pods`.
    pub resource: String,
    /// `create`, `update`, `patch`, `delete`.
    pub verb: String,
    /// Subresource (`status`, `scale`, `binding`), if any.
    #[serde(default)]
    pub subresource: Option<String>,
    /// Only writes by this client (User-Agent program: `kube-controller-manager`, `kubectl`).
    #[serde(default)]
    pub by: Option<String>,
    /// Only writes by this user, as the API server authenticated it (or as it was
    /// impersonated): `alice`, `system:cloud-controller-manager`.
    #[serde(default)]
    pub user: Option<String>,
    /// Only requests answered with this status: `403` counts the writes authorization
    /// refused. Default: the writes served (status below 400).
    #[serde(default)]
    pub code: Option<u16>,
    /// Name prefix of the written object.
    #[serde(default)]
    pub name_prefix: Option<String>,
    /// At least.
    #[serde(default)]
    pub min: Option<usize>,
    /// At most.
    #[serde(default)]
    pub max: Option<usize>,
}

/// See [`Check::MaxAlive`].
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MaxAliveCheck {
    /// Resource (plural).
    pub resource: String,
    /// Name prefix of the objects counted.
    pub name_prefix: String,
    /// The peak must be at most this.
    #[serde(default)]
    pub max: Option<usize>,
    /// The peak must be at least this (so the check is not met by doing nothing).
    #[serde(default)]
    pub min: Option<usize>,
    /// Only count from the first write of this object on (`deployments/web`, verb
    /// `update`/`patch`): "during the rollout".
    #[serde(default)]
    pub since_write: Option<String>,
}

/// See [`Check::Span`].
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SpanCheck {
    /// Component (`kube-scheduler`).
    pub component: String,
    /// Attribute key (`filter.node-1`).
    pub attribute: String,
    /// Text its value contains.
    pub contains: String,
}

/// See [`Check::Access`]: every request of `allowed` is allowed to `user` (with `groups`),
/// every one of `denied` is not. One check holds both, so "exactly these permissions" is one
/// check that fails until the grant is made.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccessCheck {
    /// The user asked about: `alice`, `system:serviceaccount:shop:robot`.
    pub user: String,
    /// Its groups (a ServiceAccount's are `system:serviceaccounts` and
    /// `system:serviceaccounts:<namespace>`; RBAC matches a ServiceAccount subject by user).
    #[serde(default)]
    pub groups: Vec<String>,
    /// Requests that must be allowed.
    #[serde(default)]
    pub allowed: Vec<AccessRequest>,
    /// Requests that must be denied.
    #[serde(default)]
    pub denied: Vec<AccessRequest>,
}

/// One request of an [`AccessCheck`], written as `kubectl auth can-i` takes it:
/// `VERB RESOURCE[.GROUP][/NAME] [-n NAMESPACE] [--subresource SUB]`, e.g. `list pods -n dev`,
/// `update nodes`, `get deployments.apps/web -n shop`, `patch nodes --subresource status`.
/// Resources are plural names (no short names); without `-n` the request is at the cluster
/// scope (all namespaces, as `kubectl auth can-i -A`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(try_from = "String")]
pub struct AccessRequest {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, ...
    pub verb: String,
    /// API group (empty: core).
    pub group: String,
    /// Resource (plural).
    pub resource: String,
    /// Subresource (`status`, `token`), if any.
    pub subresource: Option<String>,
    /// Object name, if one.
    pub name: Option<String>,
    /// Namespace; `None`: the cluster scope.
    pub namespace: Option<String>,
}

impl TryFrom<String> for AccessRequest {
    type Error = String;

    fn try_from(line: String) -> Result<Self, String> {
        let bad = |why: &str| {
            format!(
                "{line:?}: {why} (want `VERB RESOURCE[.GROUP][/NAME] [-n NAMESPACE] [--subresource SUB]`)"
            )
        };
        let mut words = line.split_whitespace();
        let verb = words.next().ok_or_else(|| bad("empty"))?.to_string();
        let target = words.next().ok_or_else(|| bad("no resource"))?;
        let (kind, name) = match target.split_once('/') {
            Some((k, n)) if !n.is_empty() => (k, Some(n.to_string())),
            Some(_) => return Err(bad("empty name")),
            None => (target, None),
        };
        let (resource, group) = kind.split_once('.').unwrap_or((kind, ""));
        let (mut namespace, mut subresource) = (None, None);
        while let Some(flag) = words.next() {
            let value = words
                .next()
                .map(str::to_string)
                .ok_or_else(|| bad(&format!("{flag} without a value")))?;
            match flag {
                "-n" | "--namespace" => namespace = Some(value),
                "--subresource" => subresource = Some(value),
                other => return Err(bad(&format!("unknown flag {other}"))),
            }
        }
        Ok(AccessRequest {
            verb,
            group: group.to_string(),
            resource: resource.to_string(),
            subresource,
            name,
            namespace,
        })
    }
}

impl std::fmt::Display for AccessRequest {
    /// As it was written: `list pods -n dev`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.verb, self.resource)?;
        if !self.group.is_empty() {
            write!(f, ".{}", self.group)?;
        }
        if let Some(name) = &self.name {
            write!(f, "/{name}")?;
        }
        if let Some(ns) = &self.namespace {
            write!(f, " -n {ns}")?;
        }
        if let Some(sub) = &self.subresource {
            write!(f, " --subresource {sub}")?;
        }
        Ok(())
    }
}

/// Something a lab does: at setup, or as a step's solution.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Action {
    /// A command line: `miniplane ...` or `kubectl ...` (split like a shell would, quotes
    /// allowed), with the lab's kubeconfig.
    Run(String),
    /// A command line that must fail, as `run` runs it: a request the cluster refuses
    /// (`kubectl get pods --as alice` answered 403). It is an error if the command succeeds.
    Refused(String),
    /// `miniplane apply -f -` of this YAML (or a file of the lab's directory).
    Apply(String),
    /// `kubectl create -f -` of this YAML: the imperative way.
    Create(String),
    /// Injects a fault.
    Fault(FaultSpec),
    /// Clears a fault by name (`all`: every one).
    ClearFault(String),
    /// Lets a paused controller process keys.
    Step {
        /// The controller.
        controller: String,
        /// How many keys (default 1).
        #[serde(default)]
        count: Option<u64>,
    },
    /// Waits (up to a minute) until a check passes.
    WaitFor(Box<CheckSpec>),
    /// Starts an operator the lab's host provides (`website-operator`: the example of
    /// `examples/website/`), which keeps running until the lab stops.
    Operator(String),
}

/// Reads `dir/lab.yaml`.
pub fn load(dir: &Path) -> Result<Lab, String> {
    let file = dir.join("lab.yaml");
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    // Through JSON values: one-key maps (`- run: ...`) are enum variants there, while the
    // YAML deserializer wants `!run` tags a teacher would not write.
    let value: Value =
        serde_norway::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut lab: Lab = serde_path_to_error::deserialize(value)
        .map_err(|e| format!("{}: {}: {}", file.display(), e.path(), e.inner()))?;
    lab.name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    lab.dir = dir.to_path_buf();
    validate(&lab).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(lab)
}

/// Every lab under `root` (directories with a `lab.yaml`), sorted by name.
pub fn load_all(root: &Path) -> Result<Vec<Lab>, String> {
    let entries = std::fs::read_dir(root).map_err(|e| format!("{}: {e}", root.display()))?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("lab.yaml").is_file())
        .collect();
    dirs.sort();
    dirs.iter().map(|d| load(d)).collect()
}

fn validate(lab: &Lab) -> Result<(), String> {
    if lab.steps.is_empty() {
        return Err("a lab needs at least one step".into());
    }
    for (i, step) in lab.steps.iter().enumerate() {
        if step.checks.is_empty() {
            return Err(format!("step {} ({}): no checks", i + 1, step.title));
        }
        let mut names = std::collections::BTreeSet::new();
        for c in &step.checks {
            if !names.insert(&c.name) {
                return Err(format!("step {}: check {:?} twice", i + 1, c.name));
            }
        }
        for c in &step.checks {
            if let Check::Access(a) = &c.check
                && a.allowed.is_empty()
                && a.denied.is_empty()
            {
                return Err(format!(
                    "step {}: check {:?} asks nothing (allowed and denied are empty)",
                    i + 1,
                    c.name
                ));
            }
        }
        if step.solution.is_empty() {
            return Err(format!("step {} ({}): no solution", i + 1, step.title));
        }
        if !step.hints_ko.is_empty() && step.hints_ko.len() != step.hints.len() {
            return Err(format!(
                "step {}: hintsKo and hints differ in length",
                i + 1
            ));
        }
    }
    Ok(())
}

impl Lab {
    /// Title in `lang` (`en`, `ko`).
    pub fn title(&self, lang: &str) -> &str {
        match (lang, &self.title_ko) {
            ("ko", Some(t)) => t,
            _ => &self.title,
        }
    }

    /// The narrative: `README.md`, or `README.ko.md` for `ko`.
    pub fn readme(&self, lang: &str) -> Result<String, String> {
        let file = if lang == "ko" {
            self.dir.join("README.ko.md")
        } else {
            self.dir.join("README.md")
        };
        std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))
    }
}

impl Step {
    /// Title in `lang`.
    pub fn title(&self, lang: &str) -> &str {
        match (lang, &self.title_ko) {
            ("ko", Some(t)) => t,
            _ => &self.title,
        }
    }

    /// Task in `lang`.
    pub fn task(&self, lang: &str) -> &str {
        match (lang, &self.task_ko) {
            ("ko", Some(t)) => t,
            _ => &self.task,
        }
    }

    /// Hints in `lang`.
    pub fn hints(&self, lang: &str) -> &[String] {
        if lang == "ko" && !self.hints_ko.is_empty() {
            &self.hints_ko
        } else {
            &self.hints
        }
    }
}

#[cfg(test)]
mod tests {
    use super::load;

    fn lab_with(yaml: &str) -> Result<super::Lab, String> {
        let dir = tempfile::tempdir().expect("temp dir");
        let lab = dir.path().join("01-test");
        std::fs::create_dir(&lab).expect("lab dir");
        std::fs::write(lab.join("lab.yaml"), yaml).expect("lab.yaml");
        load(&lab)
    }

    const STEP: &str = "
steps:
  - title: t
    task: do it
    checks:
      - name: c
        description: d
        object: {kind: Pod, name: p}
    solution:
      - run: kubectl get pods
";

    #[test]
    fn a_lab_loads_and_typos_are_refused() {
        let lab = lab_with(&format!("title: T\n{STEP}")).expect("valid lab");
        assert_eq!((lab.name.as_str(), lab.steps.len()), ("01-test", 1));
        let typo = lab_with(&format!("title: T\nsetpu: []\n{STEP}")).expect_err("typo");
        assert!(typo.contains("unknown field `setpu`"), "{typo}");
        let field = lab_with(&format!(
            "title: T\n{}",
            STEP.replace("name: p}", "nmae: p}")
        ))
        .expect_err("typo in a check");
        assert!(field.contains("nmae"), "{field}");
        let kind = lab_with(&format!("title: T\n{}", STEP.replace("object:", "obejct:")))
            .expect_err("unknown check kind");
        assert!(kind.contains("steps[0].checks[0]"), "{kind}");
        let empty = lab_with("title: T\nsteps: []\n").expect_err("no steps");
        assert!(empty.contains("at least one step"), "{empty}");
    }

    #[test]
    fn access_requests_are_written_as_kubectl_auth_can_i_takes_them() {
        use super::AccessRequest;
        let parse = |s: &str| AccessRequest::try_from(s.to_string());
        let r = parse("get deployments.apps/web -n shop").expect("valid");
        assert_eq!(
            (r.verb.as_str(), r.group.as_str(), r.resource.as_str()),
            ("get", "apps", "deployments")
        );
        assert_eq!(
            (r.name.as_deref(), r.namespace.as_deref()),
            (Some("web"), Some("shop"))
        );
        assert_eq!(r.to_string(), "get deployments.apps/web -n shop");
        let status = parse("patch nodes --subresource status").expect("valid");
        assert_eq!(
            (status.subresource.as_deref(), status.namespace.as_deref()),
            (Some("status"), None)
        );
        assert_eq!(status.to_string(), "patch nodes --subresource status");
        assert!(
            parse("list")
                .expect_err("no resource")
                .contains("no resource")
        );
        assert!(
            parse("list pods -n")
                .expect_err("no value")
                .contains("-n without a value")
        );
        assert!(
            parse("list pods --as alice")
                .expect_err("flag")
                .contains("unknown flag --as")
        );
        let nothing = lab_with(&format!(
            "title: T\n{}",
            STEP.replace("object: {kind: Pod, name: p}", "access: {user: alice}")
        ))
        .expect_err("an access check that asks nothing");
        assert!(nothing.contains("asks nothing"), "{nothing}");
        let typo = lab_with(&format!(
            "title: T\n{}",
            STEP.replace(
                "object: {kind: Pod, name: p}",
                "access: {user: alice, allowed: [list]}"
            )
        ))
        .expect_err("a request without a resource");
        assert!(typo.contains("no resource"), "{typo}");
    }
}
