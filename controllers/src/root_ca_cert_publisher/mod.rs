//! The root CA certificate publisher: a `kube-root-ca.crt` ConfigMap in every namespace, with
//! the cluster CA that pods use to check the API server (the ServiceAccount admission plugin
//! mounts its `ca.crt` in every pod, beside the token). Mirrors
//! `pkg/controller/certificates/rootcacertpublisher/publisher.go` (`Publisher`,
//! `syncNamespace`), run by kube-controller-manager as `root-ca-cert-publisher`
//! (`startRootCACertificatePublisherController` in `cmd/kube-controller-manager/app/
//! certificates.go`).
//!
//! ```text
//!   Namespace informer ─ add, update to Active ───────▶ queue "root_ca_cert_publisher"
//!   ConfigMap informer ─ kube-root-ca.crt updated or deleted ─▶ its namespace
//!     sync(namespace): no kube-root-ca.crt ─▶ create it (namespace gone or terminating: fine)
//!                      data is not exactly {ca.crt: CA} or the description annotation is
//!                      missing ─▶ update it back (other annotations and labels are kept)
//!                      else nothing
//! ```
//!
//! The CA is `--root-ca-file`, else the CA of the controller-manager's kubeconfig (its
//! `certificate-authority-data` or `certificate-authority` file), as Kubernetes takes the
//! client configuration's `CAData`; a cluster served over plain HTTP has none, and like
//! Kubernetes with an empty `CAData` the publisher then publishes `ca.crt: ""`.
//!
//! The decision is [`sync_namespace`], a plain function of the cached ConfigMap and the CA;
//! the async shell is [`controller`].

pub mod controller;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;

/// The ConfigMap's name (`RootCACertConfigMapName`).
pub const ROOT_CA_CERT_CONFIG_MAP_NAME: &str = "kube-root-ca.crt";
/// The annotation saying what the ConfigMap is for (`DescriptionAnnotation`).
pub const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
/// Its value (`Description`).
pub const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";
/// The key of the CA in `data`.
pub const CA_KEY: &str = "ca.crt";

/// What a namespace's sync does.
#[derive(Debug, Clone, PartialEq)]
pub enum Publish {
    /// The ConfigMap is missing: create this one.
    Create(Box<ConfigMap>),
    /// The ConfigMap was changed: write this one over it.
    Update {
        /// The ConfigMap with its data and annotation put back.
        config_map: Box<ConfigMap>,
        /// Why: its data or its annotation.
        why: Drift,
    },
    /// The ConfigMap is as it should be.
    UpToDate,
}

/// How a published ConfigMap differs from what the publisher wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drift {
    /// `data` is not exactly `{ca.crt: <the CA>}`.
    Data,
    /// The `kubernetes.io/description` annotation is missing or empty.
    Annotation,
}

impl Publish {
    /// The reason shown in the sync's span.
    pub fn reason(&self) -> &'static str {
        match self {
            Publish::Create(_) => "kube-root-ca.crt missing",
            Publish::Update {
                why: Drift::Data, ..
            } => "kube-root-ca.crt data differs from the root CA",
            Publish::Update {
                why: Drift::Annotation,
                ..
            } => "kube-root-ca.crt description annotation missing",
            Publish::UpToDate => "kube-root-ca.crt up to date",
        }
    }
}

/// `syncNamespace`: what to do about namespace `namespace`, whose cached ConfigMap is
/// `existing`, for the CA `root_ca` (PEM).
pub fn sync_namespace(namespace: &str, existing: Option<&ConfigMap>, root_ca: &str) -> Publish {
    let data = BTreeMap::from([(CA_KEY.to_owned(), root_ca.to_owned())]);
    let Some(cm) = existing else {
        return Publish::Create(Box::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some(ROOT_CA_CERT_CONFIG_MAP_NAME.to_owned()),
                namespace: Some(namespace.to_owned()),
                annotations: Some(BTreeMap::from([(
                    DESCRIPTION_ANNOTATION.to_owned(),
                    DESCRIPTION.to_owned(),
                )])),
                ..Default::default()
            },
            data: Some(data),
            ..Default::default()
        }));
    };
    // `reflect.DeepEqual(cm.Data, data)`: a nil map is not an empty one, but neither equals
    // a map with `ca.crt`, so comparing the contents is the same.
    let data_ok = cm.data.as_ref() == Some(&data);
    let annotated = cm
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DESCRIPTION_ANNOTATION))
        .is_some_and(|d| !d.is_empty());
    if data_ok && annotated {
        return Publish::UpToDate;
    }
    let mut fixed = cm.clone();
    fixed.data = Some(data);
    fixed
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(DESCRIPTION_ANNOTATION.to_owned(), DESCRIPTION.to_owned());
    Publish::Update {
        config_map: Box::new(fixed),
        why: if data_ok {
            Drift::Annotation
        } else {
            Drift::Data
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    fn created(namespace: &str) -> ConfigMap {
        match sync_namespace(namespace, None, CA) {
            Publish::Create(cm) => *cm,
            other => panic!("expected a create, got {other:?}"),
        }
    }

    #[test]
    fn a_namespace_without_it_gets_the_configmap_kubernetes_writes() {
        let cm = created("team-a");
        let json = serde_json::to_value(&cm).unwrap_or_default();
        assert_eq!(
            json,
            serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "kube-root-ca.crt", "namespace": "team-a",
                    "annotations": {"kubernetes.io/description": DESCRIPTION}},
                "data": {"ca.crt": CA}
            })
        );
        assert_eq!(sync_namespace("team-a", Some(&cm), CA), Publish::UpToDate);
    }

    #[test]
    fn an_edited_configmap_is_put_back_keeping_other_metadata() {
        let mut cm = created("team-a");
        cm.metadata.labels = Some(BTreeMap::from([("mine".into(), "yes".into())]));
        cm.data = Some(BTreeMap::from([
            (CA_KEY.into(), "tampered".into()),
            ("extra".into(), "x".into()),
        ]));
        let Publish::Update { config_map, why } = sync_namespace("team-a", Some(&cm), CA) else {
            panic!("expected an update");
        };
        assert_eq!(why, Drift::Data);
        assert_eq!(
            config_map.data,
            Some(BTreeMap::from([(CA_KEY.into(), CA.into())]))
        );
        assert_eq!(config_map.metadata.labels, cm.metadata.labels);

        let mut bare = created("team-a");
        bare.metadata.annotations = Some(BTreeMap::from([(
            DESCRIPTION_ANNOTATION.into(),
            String::new(),
        )]));
        let update = sync_namespace("team-a", Some(&bare), CA);
        assert_eq!(
            update.reason(),
            "kube-root-ca.crt description annotation missing"
        );
    }

    #[test]
    fn without_a_ca_the_configmap_holds_an_empty_one() {
        let cm = created("default");
        assert_eq!(
            sync_namespace("default", Some(&cm), ""),
            Publish::Update {
                config_map: Box::new(ConfigMap {
                    data: Some(BTreeMap::from([(CA_KEY.into(), String::new())])),
                    ..cm.clone()
                }),
                why: Drift::Data
            }
        );
    }
}
