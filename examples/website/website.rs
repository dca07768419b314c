//! The `Website` custom resource (`demo.miniplane.dev/v1`, defined by `crd.yaml`) and the
//! operator's decisions, as plain functions over data: what Deployment and Service a Website
//! wants, and what its status says. Both example operators (`operator.rs` on miniplane's
//! `client`, `kube_runtime.rs` on kube-rs) share this file, so they behave the same.
//!
//! ```text
//! Website blog {image: nginx:1.27, replicas: 2, port: 80}
//!   ├─ owns Deployment blog  (2 × nginx:1.27, pods labelled website=blog)
//!   ├─ owns Service blog     (port 80 → pods' 80)
//!   └─ status {observedGeneration, availableReplicas, url, conditions: [Ready]}
//! ```
#![allow(dead_code)]

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The finalizer the operators put on every Website, so they see its deletion and clean up.
pub const FINALIZER: &str = "demo.miniplane.dev/cleanup";
/// The label that ties pods to their Website.
pub const LABEL: &str = "demo.miniplane.dev/website";
/// The port nginx listens on in every pod.
pub const CONTAINER_PORT: i32 = 80;

/// A Website.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Website {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// What the owner wants.
    pub spec: WebsiteSpec,
    /// What the operator observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<WebsiteStatus>,
}

/// `spec` (the CRD's schema fills in the defaults).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebsiteSpec {
    /// The image that serves the site.
    pub image: String,
    /// How many pods serve it.
    #[serde(default = "one")]
    pub replicas: i32,
    /// The Service's port.
    #[serde(default = "eighty")]
    pub port: i32,
    /// `light` or `dark`, passed to the pods as `THEME`.
    #[serde(default)]
    pub theme: Option<String>,
}

fn one() -> i32 {
    1
}

fn eighty() -> i32 {
    80
}

/// `status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebsiteStatus {
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Pods of the site that are available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    /// Where the site is served inside the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `Ready`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// A status condition (`metav1.Condition`'s fields).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A CamelCase reason.
    #[serde(default)]
    pub reason: String,
    /// A human-readable message.
    #[serde(default)]
    pub message: String,
    /// When `status` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
}

impl k8s_openapi::Resource for Website {
    const API_VERSION: &'static str = "demo.miniplane.dev/v1";
    const GROUP: &'static str = "demo.miniplane.dev";
    const KIND: &'static str = "Website";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "websites";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for Website {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl Website {
    /// The name.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or("default")
    }

    /// Whether the operator's finalizer is on the Website.
    pub fn has_finalizer(&self) -> bool {
        self.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER)
    }

    /// Whether the Website is being deleted.
    pub fn is_deleting(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }

    /// The owner reference its Deployment and Service carry (controller: the garbage
    /// collector and `kubectl get -o wide` see who manages them).
    pub fn owner_reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: "demo.miniplane.dev/v1".into(),
            kind: "Website".into(),
            name: self.name().to_owned(),
            uid: self.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }
}

/// The finalizers after adding (`add`) or removing ours, as a JSON merge patch.
pub fn finalizers_patch(website: &Website, add: bool) -> Value {
    let mut finalizers: Vec<String> = website
        .metadata
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    if add {
        finalizers.push(FINALIZER.to_owned());
    }
    json!({"metadata": {"finalizers": finalizers, "resourceVersion": website.metadata.resource_version}})
}

/// The Deployment the Website wants (a server-side apply body).
pub fn desired_deployment(website: &Website) -> Value {
    let name = website.name();
    let theme = website.spec.theme.clone().unwrap_or_else(|| "light".into());
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": website.namespace(),
            "labels": {LABEL: name},
            "ownerReferences": [website.owner_reference()],
        },
        "spec": {
            "replicas": website.spec.replicas,
            "selector": {"matchLabels": {LABEL: name}},
            "template": {
                "metadata": {"labels": {LABEL: name}},
                "spec": {"containers": [{
                    "name": "web",
                    "image": website.spec.image,
                    "ports": [{"containerPort": CONTAINER_PORT}],
                    "env": [{"name": "THEME", "value": theme}],
                }]},
            },
        },
    })
}

/// The Service the Website wants (a server-side apply body).
pub fn desired_service(website: &Website) -> Value {
    let name = website.name();
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": website.namespace(),
            "labels": {LABEL: name},
            "ownerReferences": [website.owner_reference()],
        },
        "spec": {
            "selector": {LABEL: name},
            "ports": [{"name": "http", "port": website.spec.port, "targetPort": CONTAINER_PORT}],
        },
    })
}

/// The status the Website should report, given its Deployment as last seen and the time.
/// `lastTransitionTime` moves only when `Ready` changes.
pub fn desired_status(
    website: &Website,
    deployment: Option<&Deployment>,
    service: Option<&Service>,
    now: &str,
) -> WebsiteStatus {
    let available = deployment
        .and_then(|d| d.status.as_ref())
        .and_then(|s| s.available_replicas)
        .unwrap_or(0);
    let rolled_out = deployment.is_some_and(|d| {
        let observed = d.status.as_ref().and_then(|s| s.observed_generation);
        let updated = d
            .status
            .as_ref()
            .and_then(|s| s.updated_replicas)
            .unwrap_or(0);
        let wanted = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        observed >= d.metadata.generation && updated == wanted && wanted == website.spec.replicas
    });
    let ready = rolled_out && available >= website.spec.replicas && service.is_some();
    let (status, reason, message) = if ready {
        (
            "True",
            "Available",
            format!("{available}/{} replicas available", website.spec.replicas),
        )
    } else {
        (
            "False",
            "Progressing",
            format!("{available}/{} replicas available", website.spec.replicas),
        )
    };
    let old = website
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"));
    let last_transition_time = match old {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => Some(now.to_owned()),
    };
    WebsiteStatus {
        observed_generation: website.metadata.generation,
        available_replicas: Some(available),
        url: Some(format!(
            "http://{}.{}.svc:{}",
            website.name(),
            website.namespace(),
            website.spec.port
        )),
        conditions: vec![Condition {
            type_: "Ready".into(),
            status: status.into(),
            reason: reason.into(),
            message,
            last_transition_time,
        }],
    }
}

/// The current time as Kubernetes writes it (RFC 3339, seconds).
pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}
