//! A recording (`miniplane record FILE`, read back by `miniplane replay FILE`): every write a
//! cluster's API server made during a period, with who made it, when, and the trace that
//! carried it. No Kubernetes counterpart: kube-apiserver's audit log names every request but
//! not the object it left behind, and SimKube's traces keep only the objects.
//!
//! The file is JSON lines, one [`Line`] each:
//!
//! ```text
//!   {"type":"Recording", "startRevision":812, "startTime":"2030-01-01T00:00:00Z", "nodes":3, …}
//!   {"type":"Initial", "apiVersion":"apps/v1", "resource":"deployments", "object":{…}}   × every object at the start
//!   {"type":"Write", "revision":830, "time":"…", "change":"Updated", "manager":"kubectl-scale",
//!    "external":true, "traceparent":"00-4bf9…-01", "object":{…}}                            × every write, by revision
//!   {"type":"End", "revision":901, "time":"…", "writes":57}
//! ```
//!
//! A file without its `End` line (a recorder killed, a copy cut short), or whose `End` counts
//! other writes than it holds, is refused as a whole ([`Recording::parse`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::history::{ChangeType, Writer};

/// The `apiVersion` of a recording's first line.
pub const API_VERSION: &str = "miniplane.dev/v1";

/// The writers that belong to the control plane: field managers (`kube-controller-manager`)
/// and the components that name the spans of their requests. A write by anyone else (kubectl's
/// `kubectl-client-side-apply`, `kubectl-scale`, a Python client, an operator) is external:
/// what a replay sends again.
pub const CONTROL_PLANE: [&str; 8] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "cloud-controller-manager",
    "metrics-server",
    "clusterrole-aggregation-controller",
    // The cluster clock is replayed by the replay's own clock, not by its writes.
    "miniplane-clock",
];

/// Whether a field manager or component is part of the control plane ([`CONTROL_PLANE`]).
pub fn is_control_plane(writer: &str) -> bool {
    CONTROL_PLANE.contains(&writer)
}

/// Whether an authenticated user is a control-plane identity: Kubernetes names its
/// components' users `system:…` (`system:kube-controller-manager`, `system:kube-scheduler`,
/// `system:node:node-1`), and the controllers' ServiceAccounts live in `kube-system`. A
/// ServiceAccount of another namespace (an operator's) and `system:anonymous` are clients.
pub fn is_control_plane_user(user: &str) -> bool {
    match user.strip_prefix("system:serviceaccount:") {
        Some(account) => account.starts_with("kube-system:"),
        None => user.starts_with("system:") && user != "system:anonymous",
    }
}

/// One line of a recording file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Line {
    /// The first line: what was recorded.
    Recording(Header),
    /// An object as it was when the recording started.
    Initial(Initial),
    /// One write during the recording.
    Write(Box<Write>),
    /// The last line: where the recording stopped.
    End(End),
}

/// What a recording holds and where it started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    /// [`API_VERSION`].
    pub api_version: String,
    /// The API server recorded.
    pub server: String,
    /// The store revision the recording starts after (the lists' resourceVersion).
    pub start_revision: u64,
    /// The cluster's time when the recording started (RFC 3339).
    pub start_time: String,
    /// Whether the cluster ran on a virtual clock.
    pub clock: crate::ClockMode,
    /// How many Nodes the cluster had when the recording started.
    pub nodes: usize,
    /// The resources recorded (`deployments.apps`, `pods`).
    pub resources: Vec<String>,
}

/// An object as it was when the recording started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Initial {
    /// The group version served (`apps/v1`, `v1`).
    pub api_version: String,
    /// The resource (`deployments`).
    pub resource: String,
    /// Whether a client outside the control plane made it (a field manager not in
    /// [`CONTROL_PLANE`] and no controlling owner): a replay creates it first.
    pub external: bool,
    /// The object.
    pub object: Value,
}

/// One write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Write {
    /// The store revision of the write (the object's resourceVersion after it).
    pub revision: u64,
    /// The cluster's time when the recorder saw the write (RFC 3339, nanoseconds).
    pub time: String,
    /// The group version served (`apps/v1`, `v1`).
    pub api_version: String,
    /// The resource (`deployments`).
    pub resource: String,
    /// The object's namespace (`None`: cluster-scoped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
    /// Created, Updated or Deleted (the object removed from the store).
    pub change: ChangeType,
    /// The write set `metadata.deletionTimestamp`: it answered a delete request, and the
    /// object stays until its finalizers or its kubelet let it go.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleting: bool,
    /// Who made it: field manager, user, component, trace.
    #[serde(flatten)]
    pub writer: Writer,
    /// Made by a client outside the control plane: a replay sends it again.
    pub external: bool,
    /// The object after the write (for a delete, as it was last stored).
    pub object: Value,
}

impl Write {
    /// The object written.
    pub fn id(&self) -> ObjectId {
        ObjectId {
            api_version: self.api_version.clone(),
            resource: self.resource.clone(),
            namespace: self.namespace.clone().unwrap_or_default(),
            name: self.name.clone(),
        }
    }
}

/// Where a recording stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct End {
    /// The last revision recorded.
    pub revision: u64,
    /// The cluster's time when the recording stopped (RFC 3339).
    pub time: String,
    /// How many `Write` lines the file holds.
    pub writes: usize,
}

/// A recording read whole.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    /// Its first line.
    pub header: Header,
    /// The objects at the start.
    pub initial: Vec<Initial>,
    /// The writes, by revision.
    pub writes: Vec<Write>,
    /// Its last line.
    pub end: End,
}

/// Why a file is not a recording.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordingError {
    /// Nothing in the file.
    #[error("the file is empty")]
    Empty,
    /// A line is not JSON of a recording's line.
    #[error("line {line}: {reason}")]
    Corrupt {
        /// 1-based.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// The file stops before its `End` line.
    #[error("truncated: it stops after line {lines} without the End line a finished recording has")]
    Truncated {
        /// Lines read.
        lines: usize,
    },
}

impl Recording {
    /// The recording's lines, each a line of JSON.
    pub fn to_lines(&self) -> Result<String, serde_json::Error> {
        let mut out = String::new();
        let mut push = |line: &Line| -> Result<(), serde_json::Error> {
            out.push_str(&serde_json::to_string(line)?);
            out.push('\n');
            Ok(())
        };
        push(&Line::Recording(self.header.clone()))?;
        for i in &self.initial {
            push(&Line::Initial(i.clone()))?;
        }
        for w in &self.writes {
            push(&Line::Write(Box::new(w.clone())))?;
        }
        push(&Line::End(self.end.clone()))?;
        Ok(out)
    }

    /// Reads a recording file's text: a header first, then initial objects and writes in
    /// revision order, then an `End` that counts the writes. Anything else is refused with
    /// the line it is at.
    pub fn parse(text: &str) -> Result<Recording, RecordingError> {
        let corrupt = |line: usize, reason: String| RecordingError::Corrupt { line, reason };
        let mut header = None;
        let mut initial = Vec::new();
        let mut writes: Vec<Write> = Vec::new();
        let all: Vec<&str> = text.lines().collect();
        let mut lines = 0;
        for (i, text) in all.iter().enumerate() {
            let n = i + 1;
            lines = n;
            if text.trim().is_empty() {
                continue;
            }
            let line: Line = serde_json::from_str(text).map_err(|e| corrupt(n, e.to_string()))?;
            match (line, &header) {
                (Line::Recording(h), None) => {
                    if h.api_version != API_VERSION {
                        return Err(corrupt(
                            n,
                            format!("apiVersion {:?} is not {API_VERSION:?}", h.api_version),
                        ));
                    }
                    header = Some(h);
                }
                (_, None) => {
                    return Err(corrupt(
                        n,
                        "the first line is not a Recording header".into(),
                    ));
                }
                (Line::Recording(_), Some(_)) => {
                    return Err(corrupt(n, "a second Recording header".into()));
                }
                (Line::Initial(o), Some(_)) if writes.is_empty() => initial.push(o),
                (Line::Initial(_), Some(_)) => {
                    return Err(corrupt(
                        n,
                        "an Initial object after the writes began".into(),
                    ));
                }
                (Line::Write(w), Some(_)) => {
                    if let Some(last) = writes.last()
                        && w.revision < last.revision
                    {
                        return Err(corrupt(
                            n,
                            format!(
                                "revision {} comes after revision {}: writes are in revision order",
                                w.revision, last.revision
                            ),
                        ));
                    }
                    writes.push(*w);
                }
                (Line::End(end), Some(h)) => {
                    if end.writes != writes.len() {
                        return Err(corrupt(
                            n,
                            format!(
                                "the End line counts {} writes, the file holds {}",
                                end.writes,
                                writes.len()
                            ),
                        ));
                    }
                    if let Some(extra) = all[n..].iter().position(|l| !l.trim().is_empty()) {
                        return Err(corrupt(n + 1 + extra, "a line after the End line".into()));
                    }
                    let header = h.clone();
                    return Ok(Recording {
                        header,
                        initial,
                        writes,
                        end,
                    });
                }
            }
        }
        if header.is_none() {
            return Err(RecordingError::Empty);
        }
        Err(RecordingError::Truncated { lines })
    }

    /// The writes a replay sends again.
    pub fn external_writes(&self) -> impl Iterator<Item = &Write> {
        self.writes.iter().filter(|w| w.external)
    }

    /// Every object at the start, keyed by its [`ObjectId`].
    pub fn initial_objects(&self) -> BTreeMap<ObjectId, Value> {
        self.initial
            .iter()
            .filter_map(|i| {
                ObjectId::of(&i.api_version, &i.resource, &i.object)
                    .map(|id| (id, i.object.clone()))
            })
            .collect()
    }

    /// Every object as the recording left it, keyed by (resource with its group version,
    /// namespace, name): the initial objects with every write applied.
    pub fn final_objects(&self) -> BTreeMap<ObjectId, Value> {
        let mut objects = self.initial_objects();
        for w in &self.writes {
            let id = w.id();
            if w.change == ChangeType::Deleted {
                objects.remove(&id);
            } else {
                objects.insert(id, w.object.clone());
            }
        }
        objects
    }
}

/// An object's identity in a recording: its resource (with group version), namespace (empty
/// for cluster-scoped) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectId {
    /// `apps/v1`.
    pub api_version: String,
    /// `deployments`.
    pub resource: String,
    /// The namespace; empty for a cluster-scoped object.
    pub namespace: String,
    /// The name.
    pub name: String,
}

impl ObjectId {
    /// The identity of `object` served as `resource` of `api_version`, if it has a name.
    pub fn of(api_version: &str, resource: &str, object: &Value) -> Option<ObjectId> {
        let meta = object.get("metadata")?;
        Some(ObjectId {
            api_version: api_version.to_owned(),
            resource: resource.to_owned(),
            namespace: meta
                .get("namespace")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            name: meta.get("name")?.as_str()?.to_owned(),
        })
    }

    /// `deployments.apps default/web`, `nodes node-1`: as the replay's report names it.
    pub fn display(&self) -> String {
        let group = self.api_version.rsplit_once('/').map(|(g, _)| g);
        let resource = match group {
            Some(g) => format!("{}.{g}", self.resource),
            None => self.resource.clone(),
        };
        if self.namespace.is_empty() {
            format!("{resource} {}", self.name)
        } else {
            format!("{resource} {}/{}", self.namespace, self.name)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write(revision: u64, change: ChangeType, name: &str, replicas: i64) -> Write {
        Write {
            revision,
            time: "2030-01-01T00:00:01Z".into(),
            api_version: "apps/v1".into(),
            resource: "deployments".into(),
            namespace: Some("default".into()),
            name: name.into(),
            change,
            deleting: false,
            writer: Writer {
                manager: Some("kubectl-scale".into()),
                operation: Some("Update".into()),
                ..Writer::default()
            },
            external: true,
            object: json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"replicas": replicas}}),
        }
    }

    fn recording() -> Recording {
        Recording {
            header: Header {
                api_version: API_VERSION.into(),
                server: "https://127.0.0.1:6443".into(),
                start_revision: 10,
                start_time: "2030-01-01T00:00:00Z".into(),
                clock: crate::ClockMode::Virtual,
                nodes: 2,
                resources: vec!["deployments.apps".into()],
            },
            initial: vec![Initial {
                api_version: "apps/v1".into(),
                resource: "deployments".into(),
                external: true,
                object: json!({"metadata": {"name": "old", "namespace": "default"}}),
            }],
            writes: vec![
                write(11, ChangeType::Created, "web", 1),
                write(12, ChangeType::Updated, "web", 3),
                write(13, ChangeType::Deleted, "old", 0),
            ],
            end: End {
                revision: 13,
                time: "2030-01-01T00:00:05Z".into(),
                writes: 3,
            },
        }
    }

    #[test]
    fn a_recording_reads_back_as_written_and_folds_to_its_last_objects() {
        let r = recording();
        let text = r.to_lines().unwrap();
        assert_eq!(text.lines().count(), 6);
        assert_eq!(Recording::parse(&text), Ok(r.clone()));
        let last = r.final_objects();
        assert_eq!(last.len(), 1, "old was deleted");
        let (id, obj) = last.iter().next().unwrap();
        assert_eq!(id.display(), "deployments.apps default/web");
        assert_eq!(obj["spec"]["replicas"], 3);
        assert_eq!(r.external_writes().count(), 3);
    }

    #[test]
    fn cut_or_damaged_recordings_are_refused_with_the_line() {
        let text = recording().to_lines().unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(Recording::parse(""), Err(RecordingError::Empty));
        // Cut before its End line.
        assert_eq!(
            Recording::parse(&lines[..5].join("\n")),
            Err(RecordingError::Truncated { lines: 5 })
        );
        // Cut inside a line.
        let cut = &text[..text.len() - 20];
        assert!(matches!(
            Recording::parse(cut),
            Err(RecordingError::Corrupt { line: 6, .. })
        ));
        // A write dropped: the End counts three.
        let dropped = [&lines[..3], &lines[4..]].concat().join("\n");
        let err = Recording::parse(&dropped).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 5: the End line counts 3 writes, the file holds 2"
        );
        // Writes out of order.
        let swapped = [lines[0], lines[1], lines[3], lines[2], lines[4], lines[5]].join("\n");
        assert!(
            Recording::parse(&swapped)
                .unwrap_err()
                .to_string()
                .contains("line 4: revision 11 comes after revision 12")
        );
        // Not a recording at all.
        assert!(
            Recording::parse("{\"kind\":\"List\"}")
                .unwrap_err()
                .to_string()
                .starts_with("line 1: ")
        );
        assert!(
            Recording::parse(&format!("{text}{}\n", lines[2]))
                .unwrap_err()
                .to_string()
                .contains("line 7: a line after the End line")
        );
    }

    #[test]
    fn the_control_plane_is_known_by_its_managers() {
        assert!(is_control_plane("kube-controller-manager"));
        assert!(is_control_plane("kubelet"));
        assert!(!is_control_plane("kubectl-client-side-apply"));
        assert!(!is_control_plane("miniplane-fault"));
        // `miniplane apply`'s field manager: a client like kubectl.
        assert!(!is_control_plane("miniplane"));
        assert!(is_control_plane_user("system:kube-controller-manager"));
        assert!(is_control_plane_user("system:node:node-0"));
        assert!(is_control_plane_user(
            "system:serviceaccount:kube-system:deployment-controller"
        ));
        assert!(!is_control_plane_user(
            "system:serviceaccount:shop:operator"
        ));
        assert!(!is_control_plane_user("kubernetes-admin"));
        assert!(!is_control_plane_user("system:anonymous"));
        let w = write(1, ChangeType::Created, "web", 1).writer;
        assert_eq!(w.who(), "kubectl-scale");
        let w = Writer {
            user: Some("kubernetes-admin".into()),
            ..w
        };
        assert_eq!(w.who(), "kubernetes-admin (kubectl-scale)");
        let w = Writer {
            user: Some("system:serviceaccount:kube-system:deployment-controller".into()),
            component: Some("kube-controller-manager".into()),
            ..w
        };
        assert_eq!(
            w.who(),
            "system:serviceaccount:kube-system:deployment-controller (kube-controller-manager)"
        );
    }
}
