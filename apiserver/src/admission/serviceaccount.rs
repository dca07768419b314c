//! The `ServiceAccount` admission plugin: every pod created runs as a ServiceAccount that
//! exists, and gets that account's API token, the cluster CA and its namespace as files.
//!
//! Mirrors `plugin/pkg/admission/serviceaccount/admission.go` (`Admit`, `Validate`,
//! `getServiceAccount`, `shouldAutomount`, `mountServiceAccountToken`, `TokenVolumeSource`).
//! On a pod create (by POST, or by a server-side apply that creates it):
//!
//! ```text
//!   mirror pod (annotation kubernetes.io/config.mirror)? ─▶ not mutated; refused if it
//!       names a ServiceAccount, a Secret or a token projection
//!   spec.serviceAccountName ""  ─▶ "default"
//!   the ServiceAccount exists?  ─▶ else 403 `pods "x" is forbidden: error looking up service
//!       account ns/name: serviceaccount "name" not found` (for `default`, which the
//!       ServiceAccount controller makes, it is looked up 10 times 100-200 ms apart)
//!   automountServiceAccountToken false on the pod (or, unset there, on the ServiceAccount)?
//!       ─▶ nothing mounted
//!   else every init container and container without a mount at
//!       /var/run/secrets/kubernetes.io/serviceaccount gets one (readOnly) of the volume
//!       kube-api-access-<5 random chars>, added to the pod as
//!         projected (defaultMode 420):
//!           serviceAccountToken  expirationSeconds 3607, path token
//!           configMap            kube-root-ca.crt, item ca.crt → ca.crt
//!           downwardAPI          metadata.namespace (v1) → namespace
//!   spec.imagePullSecrets empty ─▶ the ServiceAccount's
//! ```
//!
//! Ephemeral containers get no mount, as in Kubernetes (they cannot be set on create).
//! The lookup is async and happens first ([`prepare`]); the decision itself ([`admit`]) is a
//! plain function of the pod and the ServiceAccount, run inside the create's preparation
//! ([`ServiceAccountAdmission::admit`], from `rest::before_create`). Unlike Kubernetes, the
//! ServiceAccount is read from the store rather than from an informer's cache, and the
//! `kubernetes.io/enforce-mountable-secrets` annotation is not enforced.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ConfigMapProjection, Container, DownwardAPIProjection, DownwardAPIVolumeFile, KeyToPath,
    LocalObjectReference, ObjectFieldSelector, Pod, ProjectedVolumeSource, ServiceAccount,
    ServiceAccountTokenProjection, Volume, VolumeMount, VolumeProjection,
};
use rand::Rng;
use serde_json::Value;

use crate::error::{ApiError, Result};
use crate::registry::ResourceInfo;
use crate::request_trace::WriteTrace;
use crate::storage::{ObjectRef, Storage, target};

/// The ServiceAccount a pod that names none runs as (`DefaultServiceAccountName`).
pub const DEFAULT_SERVICE_ACCOUNT_NAME: &str = "default";
/// The prefix of the token volume's name (`ServiceAccountVolumeName`).
pub const SERVICE_ACCOUNT_VOLUME_NAME: &str = "kube-api-access";
/// Where the token volume is mounted (`DefaultAPITokenMountPath`).
pub const DEFAULT_API_TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The annotation of a kubelet's mirror pod (`MirrorPodAnnotationKey`).
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// The token's lifetime in the volume (`WarnOnlyBoundTokenExpirationSeconds`: an hour and
/// 7 s, which tells the API server a token of the projected volume from one asked for).
pub const TOKEN_EXPIRATION_SECONDS: i64 = 3607;
/// The ConfigMap with the cluster CA, published in every namespace by the controller-manager.
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
/// The projected volume's file mode (`ProjectedVolumeSourceDefaultMode`, 0644).
pub const DEFAULT_MODE: i32 = 0o644;
/// The name of the span attribute that says what the plugin did.
pub const TRACE_ATTRIBUTE: &str = "admission.serviceAccount";

/// How often `default` is looked up before it is called missing (the ServiceAccount
/// controller may not have made it yet in a new namespace); any other name once.
const DEFAULT_LOOKUPS: usize = 10;

/// Why no token volume was mounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotMounted {
    /// `spec.automountServiceAccountToken: false` on the pod.
    PodOptOut,
    /// `automountServiceAccountToken: false` on the ServiceAccount (and unset on the pod).
    ServiceAccountOptOut,
    /// Every container already mounts something at the token's path.
    AlreadyMounted,
}

/// What the plugin did to a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// A mirror pod: left as it is.
    MirrorPod,
    /// The pod runs as `service_account` with the token volume `volume` mounted (`added`:
    /// the volume was added, not one of the pod's own `kube-api-access-*` volumes).
    Mounted {
        /// The ServiceAccount.
        service_account: String,
        /// The volume's name.
        volume: String,
        /// Whether the volume was added.
        added: bool,
    },
    /// The pod runs as `service_account` without a token volume.
    NotMounted {
        /// The ServiceAccount.
        service_account: String,
        /// Why.
        why: NotMounted,
    },
}

impl Decision {
    /// One line for the request's span.
    pub fn describe(&self) -> String {
        match self {
            Decision::MirrorPod => "mirror pod: not mutated".into(),
            Decision::Mounted {
                service_account,
                volume,
                added: true,
            } => format!("{service_account}: mounted volume {volume} (added)"),
            Decision::Mounted {
                service_account,
                volume,
                added: false,
            } => format!("{service_account}: mounted the pod's volume {volume}"),
            Decision::NotMounted {
                service_account,
                why,
            } => {
                let why = match why {
                    NotMounted::PodOptOut => "automountServiceAccountToken is false on the pod",
                    NotMounted::ServiceAccountOptOut => {
                        "automountServiceAccountToken is false on the ServiceAccount"
                    }
                    NotMounted::AlreadyMounted => {
                        "every container already mounts /var/run/secrets/kubernetes.io/serviceaccount"
                    }
                };
                format!("{service_account}: no token volume ({why})")
            }
        }
    }
}

/// The ServiceAccount a pod asks for: `spec.serviceAccountName`, else the deprecated
/// `spec.serviceAccount` (as the v1 conversion reads it), else [`DEFAULT_SERVICE_ACCOUNT_NAME`].
pub fn requested_service_account(pod: &Pod) -> String {
    let spec = pod.spec.as_ref();
    [
        spec.and_then(|s| s.service_account_name.as_deref()),
        spec.and_then(|s| s.service_account.as_deref()),
    ]
    .into_iter()
    .flatten()
    .find(|s| !s.is_empty())
    .unwrap_or(DEFAULT_SERVICE_ACCOUNT_NAME)
    .to_owned()
}

/// Whether `pod` is a kubelet's mirror pod.
pub fn is_mirror_pod(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION))
}

/// `Validate` for a mirror pod: it may not name a ServiceAccount, a Secret or a token
/// projection. `Err` is the reason of the 403.
pub fn validate_mirror_pod(pod: &Pod) -> std::result::Result<(), &'static str> {
    let Some(spec) = &pod.spec else {
        return Ok(());
    };
    if spec
        .service_account_name
        .as_deref()
        .is_some_and(|s| !s.is_empty())
        || spec
            .service_account
            .as_deref()
            .is_some_and(|s| !s.is_empty())
    {
        return Err("a mirror pod may not reference service accounts");
    }
    let volumes = spec.volumes.iter().flatten();
    let projections = || {
        volumes
            .clone()
            .filter_map(|v| v.projected.as_ref())
            .flat_map(|p| p.sources.iter().flatten())
    };
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    let container_secrets = |c: &Container| {
        c.env.iter().flatten().any(|e| {
            e.value_from
                .as_ref()
                .is_some_and(|v| v.secret_key_ref.is_some())
        }) || c.env_from.iter().flatten().any(|e| e.secret_ref.is_some())
    };
    let secrets = spec
        .image_pull_secrets
        .as_ref()
        .is_some_and(|s| !s.is_empty())
        || volumes.clone().any(|v| v.secret.is_some())
        || projections().any(|p| p.secret.is_some())
        || containers.clone().any(container_secrets)
        || spec.ephemeral_containers.iter().flatten().any(|c| {
            c.env.iter().flatten().any(|e| {
                e.value_from
                    .as_ref()
                    .is_some_and(|v| v.secret_key_ref.is_some())
            }) || c.env_from.iter().flatten().any(|e| e.secret_ref.is_some())
        });
    if secrets {
        return Err("a mirror pod may not reference secrets");
    }
    if projections().any(|p| p.service_account_token.is_some()) {
        return Err("a mirror pod may not use ServiceAccountToken volume projections");
    }
    Ok(())
}

/// `Admit` for a pod that is not a mirror pod, given its ServiceAccount `sa` (which exists):
/// sets `spec.serviceAccountName`, mounts the token volume unless opted out (named by
/// `volume_name` when one is added), copies the account's image pull secrets to a pod with
/// none.
pub fn admit(pod: &mut Pod, sa: &ServiceAccount, volume_name: impl FnOnce() -> String) -> Decision {
    let service_account = requested_service_account(pod);
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.service_account_name = Some(service_account.clone());
    let decision = match should_automount(sa, spec.automount_service_account_token) {
        Err(why) => Decision::NotMounted {
            service_account,
            why,
        },
        Ok(()) => match mount_service_account_token(pod, volume_name) {
            Some((volume, added)) => Decision::Mounted {
                service_account,
                volume,
                added,
            },
            None => Decision::NotMounted {
                service_account,
                why: NotMounted::AlreadyMounted,
            },
        },
    };
    let spec = pod.spec.get_or_insert_with(Default::default);
    if spec.image_pull_secrets.as_ref().is_none_or(Vec::is_empty)
        && let Some(secrets) = sa.image_pull_secrets.as_ref().filter(|s| !s.is_empty())
    {
        spec.image_pull_secrets = Some(
            secrets
                .iter()
                .map(|s| LocalObjectReference {
                    name: s.name.clone(),
                })
                .collect(),
        );
    }
    decision
}

/// `shouldAutomount`: the pod's choice wins, then the ServiceAccount's, else mount.
fn should_automount(
    sa: &ServiceAccount,
    pod_choice: Option<bool>,
) -> std::result::Result<(), NotMounted> {
    match (pod_choice, sa.automount_service_account_token) {
        (Some(false), _) => Err(NotMounted::PodOptOut),
        (Some(true), _) => Ok(()),
        (None, Some(false)) => Err(NotMounted::ServiceAccountOptOut),
        (None, _) => Ok(()),
    }
}

/// `mountServiceAccountToken`: the volume's name and whether it was added, or `None` when
/// every container already mounts the token path (then nothing changes).
fn mount_service_account_token(
    pod: &mut Pod,
    volume_name: impl FnOnce() -> String,
) -> Option<(String, bool)> {
    let spec = pod.spec.get_or_insert_with(Default::default);
    let prefix = format!("{SERVICE_ACCOUNT_VOLUME_NAME}-");
    // Only the volumes up to the first token volume count, as in Kubernetes' loop.
    let existing = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name.starts_with(&prefix))
        .map(|v| v.name.clone());
    let has_volume = existing.is_some();
    let name = existing.unwrap_or_else(volume_name);
    let mount = VolumeMount {
        name: name.clone(),
        read_only: Some(true),
        mount_path: DEFAULT_API_TOKEN_MOUNT_PATH.to_owned(),
        ..Default::default()
    };
    let mut needs_volume = false;
    for c in spec
        .init_containers
        .iter_mut()
        .flatten()
        .chain(spec.containers.iter_mut())
    {
        let mounted = c
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.mount_path == DEFAULT_API_TOKEN_MOUNT_PATH);
        if !mounted {
            c.volume_mounts
                .get_or_insert_with(Vec::new)
                .push(mount.clone());
            needs_volume = true;
        }
    }
    if !needs_volume {
        return None;
    }
    if !has_volume {
        spec.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: name.clone(),
            projected: Some(token_volume_source()),
            ..Default::default()
        });
    }
    Some((name, !has_volume))
}

/// `TokenVolumeSource`: the token, the cluster CA and the namespace, in this order.
pub fn token_volume_source() -> ProjectedVolumeSource {
    ProjectedVolumeSource {
        default_mode: Some(DEFAULT_MODE),
        sources: Some(vec![
            VolumeProjection {
                service_account_token: Some(ServiceAccountTokenProjection {
                    path: "token".into(),
                    expiration_seconds: Some(TOKEN_EXPIRATION_SECONDS),
                    audience: None,
                }),
                ..Default::default()
            },
            VolumeProjection {
                config_map: Some(ConfigMapProjection {
                    name: ROOT_CA_CONFIG_MAP.into(),
                    items: Some(vec![KeyToPath {
                        key: "ca.crt".into(),
                        path: "ca.crt".into(),
                        mode: None,
                    }]),
                    optional: None,
                }),
                ..Default::default()
            },
            VolumeProjection {
                downward_api: Some(DownwardAPIProjection {
                    items: Some(vec![DownwardAPIVolumeFile {
                        path: "namespace".into(),
                        field_ref: Some(ObjectFieldSelector {
                            api_version: Some("v1".into()),
                            field_path: "metadata.namespace".into(),
                        }),
                        ..Default::default()
                    }]),
                }),
                ..Default::default()
            },
        ]),
    }
}

/// What the lookup found, before the create is prepared.
#[derive(Debug, Clone)]
enum Lookup {
    /// A mirror pod: nothing is looked up.
    MirrorPod,
    /// The ServiceAccount.
    Found(Box<ServiceAccount>),
    /// It does not exist (`serviceaccount "name" not found`).
    Missing(String),
}

/// The plugin for one pod create: the ServiceAccount looked up, ready to admit the pod
/// inside the create's preparation (`rest::before_create`, which is synchronous).
#[derive(Debug, Clone)]
pub struct ServiceAccountAdmission {
    namespace: String,
    lookup: Lookup,
    /// Where the decision is noted.
    trace: Option<Arc<WriteTrace>>,
}

/// Whether the plugin applies to a write of `info`: pods (the main resource).
pub fn applies_to(info: &ResourceInfo) -> bool {
    info.gvr.group.is_empty() && info.gvr.resource == "pods"
}

/// Looks up the ServiceAccount the pod `body` asks for in `namespace` (`getServiceAccount`,
/// with its retries for `default`); `service_accounts` is their registry row.
pub async fn prepare(
    storage: &Storage,
    service_accounts: Arc<ResourceInfo>,
    namespace: &str,
    body: &Value,
) -> Result<ServiceAccountAdmission> {
    let pod: Pod = serde_json::from_value(body.clone()).unwrap_or_default();
    let lookup = if is_mirror_pod(&pod) {
        Lookup::MirrorPod
    } else {
        let name = requested_service_account(&pod);
        let r = ObjectRef {
            info: service_accounts,
            namespace: Some(namespace.to_owned()),
            name: name.clone(),
        };
        let attempts = if name == DEFAULT_SERVICE_ACCOUNT_NAME {
            DEFAULT_LOOKUPS
        } else {
            1
        };
        let interval = Duration::from_millis(rand::rng().random_range(100..200));
        let mut found = None;
        for attempt in 0..attempts {
            if attempt > 0 {
                tokio::time::sleep(interval).await;
            }
            if let Some(sa) = storage.get_as::<ServiceAccount>(&r).await? {
                found = Some(sa);
                break;
            }
        }
        match found {
            Some(sa) => Lookup::Found(Box::new(sa)),
            None => Lookup::Missing(name),
        }
    };
    Ok(ServiceAccountAdmission {
        namespace: namespace.to_owned(),
        lookup,
        trace: storage.write_trace().cloned(),
    })
}

impl ServiceAccountAdmission {
    /// Admits the pod `obj` of resource `info` (JSON, decoded as a pod before): mutates it as
    /// [`admit`] does, or refuses it with kube-apiserver's 403. The decision is noted on the
    /// request's span ([`TRACE_ATTRIBUTE`]). `volume_name` names an added token volume.
    pub fn admit(
        &self,
        info: &ResourceInfo,
        obj: &mut Value,
        volume_name: impl FnOnce() -> String,
    ) -> Result<()> {
        let Ok(mut pod) = serde_json::from_value::<Pod>(obj.clone()) else {
            // Not a pod: the strategy's decoding answers the 400.
            return Ok(());
        };
        let refuse = |why: String| {
            let name = crate::meta::name(obj)
                .or_else(|| crate::meta::generate_name(obj))
                .unwrap_or("Unknown")
                .to_owned();
            self.note(format!("refused: {why}"));
            ApiError::Forbidden {
                message: format!("{} {name:?} is forbidden: {why}", info.gvr.resource),
                target: target(info, &name),
            }
        };
        let sa = match &self.lookup {
            Lookup::MirrorPod => {
                validate_mirror_pod(&pod).map_err(|why| refuse(why.to_owned()))?;
                self.note(Decision::MirrorPod.describe());
                return Ok(());
            }
            Lookup::Missing(name) => {
                return Err(refuse(format!(
                    "error looking up service account {}/{name}: serviceaccount {name:?} not found",
                    self.namespace
                )));
            }
            Lookup::Found(sa) => sa,
        };
        let decision = admit(&mut pod, sa, volume_name);
        self.note(decision.describe());
        *obj = serde_json::to_value(&pod)
            .map_err(|e| ApiError::Internal(format!("an admitted pod does not encode: {e}")))?;
        Ok(())
    }

    fn note(&self, what: String) {
        if let Some(trace) = &self.trace {
            trace.note(TRACE_ATTRIBUTE, what);
        }
    }
}

#[cfg(test)]
#[path = "serviceaccount_tests.rs"]
mod tests;
