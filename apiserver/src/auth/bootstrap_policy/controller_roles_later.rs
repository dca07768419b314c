//! The controller roles `controller_policy.go` registers after its original, alphabetical list
//! (from `certificate-controller` on: protection, publishing, status and storage-version
//! controllers, several behind feature gates), and the dynamic resource allocation
//! controllers, in Go's order.

use super::FeatureGates;
use super::controller_roles::ControllerRoles;
use super::rules::{
    ADMISSION_REGISTRATION, AUTHORIZATION, BATCH, CERTIFICATES, COORDINATION, INTERNAL_API_SERVER,
    KUBE_APISERVER_CLIENT_KUBELET_SIGNER, KUBE_APISERVER_CLIENT_SIGNER, KUBELET_SERVING_SIGNER,
    LEGACY, LEGACY_UNKNOWN_SIGNER, RESOURCE, STORAGE, STORAGE_VERSION_MIGRATION, events_rule, rule,
};

/// Adds the roles Go registers from `certificate-controller` on.
pub(super) fn add_later_controllers(c: &mut ControllerRoles, gates: &FeatureGates) {
    c.add(
        "certificate-controller",
        vec![
            rule(&["get", "list", "watch", "delete"])
                .groups(&[CERTIFICATES])
                .resources(&["certificatesigningrequests"]),
            rule(&["update"]).groups(&[CERTIFICATES]).resources(&[
                "certificatesigningrequests/status",
                "certificatesigningrequests/approval",
            ]),
            rule(&["approve"])
                .groups(&[CERTIFICATES])
                .resources(&["signers"])
                .names(&[KUBE_APISERVER_CLIENT_KUBELET_SIGNER]),
            rule(&["sign"])
                .groups(&[CERTIFICATES])
                .resources(&["signers"])
                .names(&[
                    LEGACY_UNKNOWN_SIGNER,
                    KUBE_APISERVER_CLIENT_SIGNER,
                    KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
                    KUBELET_SERVING_SIGNER,
                ]),
            rule(&["create"])
                .groups(&[AUTHORIZATION])
                .resources(&["subjectaccessreviews"]),
            events_rule(),
        ],
    );
    c.add(
        "pvc-protection-controller",
        vec![
            rule(&["get", "list", "watch", "update"])
                .groups(&[LEGACY])
                .resources(&["persistentvolumeclaims"]),
            rule(&["list", "watch", "get"])
                .groups(&[LEGACY])
                .resources(&["pods"]),
            events_rule(),
        ],
    );
    c.add(
        "pv-protection-controller",
        vec![
            rule(&["get", "list", "watch", "update"])
                .groups(&[LEGACY])
                .resources(&["persistentvolumes"]),
            events_rule(),
        ],
    );
    if gates.volume_attributes_class {
        c.add(
            "volumeattributesclass-protection-controller",
            vec![
                rule(&["list", "watch", "get"])
                    .groups(&[LEGACY])
                    .resources(&["persistentvolumeclaims"]),
                rule(&["list", "watch", "get"])
                    .groups(&[LEGACY])
                    .resources(&["persistentvolumes"]),
                rule(&["get", "list", "watch", "update"])
                    .groups(&[STORAGE])
                    .resources(&["volumeattributesclasses"]),
                events_rule(),
            ],
        );
    }
    c.add(
        "ttl-after-finished-controller",
        vec![
            rule(&["get", "list", "watch", "delete"])
                .groups(&[BATCH])
                .resources(&["jobs"]),
            events_rule(),
        ],
    );
    c.add(
        "root-ca-cert-publisher",
        vec![
            rule(&["create", "update"])
                .groups(&[LEGACY])
                .resources(&["configmaps"]),
            events_rule(),
        ],
    );
    if gates.cluster_trust_bundle {
        c.add(
            "kube-apiserver-serving-clustertrustbundle-publisher",
            vec![
                rule(&["attest"])
                    .groups(&[CERTIFICATES])
                    .resources(&["signers"])
                    .names(&["kubernetes.io/kube-apiserver-serving"]),
                rule(&["create", "update", "delete", "list", "watch"])
                    .groups(&[CERTIFICATES])
                    .resources(&["clustertrustbundles"]),
                events_rule(),
            ],
        );
    }
    c.add(
        "validatingadmissionpolicy-status-controller",
        vec![
            rule(&["get", "list", "watch"])
                .groups(&[ADMISSION_REGISTRATION])
                .resources(&["validatingadmissionpolicies"]),
            rule(&["get", "patch", "update"])
                .groups(&[ADMISSION_REGISTRATION])
                .resources(&["validatingadmissionpolicies/status"]),
            events_rule(),
        ],
    );
    if gates.storage_version_api && gates.api_server_identity {
        c.add(
            "storage-version-garbage-collector",
            vec![
                rule(&["get", "list", "watch"])
                    .groups(&[COORDINATION])
                    .resources(&["leases"]),
                rule(&["get", "list", "watch", "patch", "update", "delete"])
                    .groups(&[INTERNAL_API_SERVER])
                    .resources(&["storageversions"]),
                rule(&["get", "patch", "update"])
                    .groups(&[INTERNAL_API_SERVER])
                    .resources(&["storageversions/status"]),
            ],
        );
    }
    c.add(
        "legacy-service-account-token-cleaner",
        vec![
            rule(&["get"])
                .groups(&[LEGACY])
                .resources(&["configmaps"])
                .names(&["kube-apiserver-legacy-service-account-token-tracking"]),
            rule(&["patch", "delete"])
                .groups(&[LEGACY])
                .resources(&["secrets"]),
        ],
    );
    if gates.storage_version_migrator {
        c.add(
            "storage-version-migrator-controller",
            vec![
                // list for the current resourceVersion of any resource, patch for its
                // server-side apply, create as such an apply of a deleted object is a create
                // (that always fails with a conflict, the uid being set).
                rule(&["list", "watch", "create", "patch"])
                    .groups(&["*"])
                    .resources(&["*"]),
                rule(&["update"])
                    .groups(&[STORAGE_VERSION_MIGRATION])
                    .resources(&["storageversionmigrations/status"]),
            ],
        );
    }
    if gates.selinux_change_policy {
        c.add(
            "selinux-warning-controller",
            vec![
                events_rule(),
                rule(&["get", "list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["persistentvolumes"]),
                rule(&["get", "list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["persistentvolumeclaims"]),
                rule(&["get", "list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["pods"]),
                rule(&["get", "list", "watch"])
                    .groups(&[STORAGE])
                    .resources(&["csidrivers"]),
            ],
        );
    }
}

/// The dynamic resource allocation controllers: the ResourceClaim controller and, with
/// `DRADeviceTaints`, the device taint eviction controller.
pub(super) fn add_dra_controllers(c: &mut ControllerRoles, gates: &FeatureGates) {
    c.add(
        "resource-claim-controller",
        vec![
            rule(&["get", "list", "watch"])
                .groups(&[LEGACY])
                .resources(&["pods"]),
            rule(&["update"])
                .groups(&[LEGACY])
                .resources(&["pods/finalizers"]),
            rule(&["get", "list", "watch", "create", "delete"])
                .groups(&[RESOURCE])
                .resources(&["resourceclaims"]),
            rule(&["update", "patch"])
                .groups(&[RESOURCE])
                .resources(&["resourceclaims", "resourceclaims/status"]),
            rule(&["update", "patch"])
                .groups(&[LEGACY])
                .resources(&["pods/status"]),
            events_rule(),
        ],
    );
    if gates.dra_device_taints {
        c.add(
            "device-taint-eviction-controller",
            vec![
                // Deletes pods to evict them.
                rule(&["get", "list", "watch", "delete"])
                    .groups(&[LEGACY])
                    .resources(&["pods"]),
                // Sets pod conditions.
                rule(&["update", "patch"])
                    .groups(&[LEGACY])
                    .resources(&["pods/status"]),
                // The rest is read-only.
                rule(&["get", "list", "watch"])
                    .groups(&[RESOURCE])
                    .resources(&["resourceclaims"]),
                rule(&["get", "list", "watch"])
                    .groups(&[RESOURCE])
                    .resources(&["resourceslices"]),
                rule(&["get", "list", "watch"])
                    .groups(&[RESOURCE])
                    .resources(&["deviceclasses"]),
                rule(&["get", "list", "watch"])
                    .groups(&[RESOURCE])
                    .resources(&["devicetaintrules"]),
                events_rule(),
            ],
        );
    }
}
