//! Admission: which of kube-apiserver's admission plugins run (`--enable-admission-plugins`,
//! `--disable-admission-plugins`), and the plugins that need more than one object's strategy.
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/server/options/admission.go` (the two flags and
//! their validation) and `pkg/kubeapiserver/options/plugins.go` (`AllOrderedPlugins`,
//! `DefaultOffAdmissionPlugins`). Admission runs on a create after the body is decoded and
//! defaulted and before the strategy prepares and validates it:
//!
//! ```text
//!   POST .../pods ─▶ decode ─▶ NamespaceLifecycle ─▶ ServiceAccount (serviceaccount.rs:
//!                    the pod's ServiceAccount must exist; the token volume is mounted)
//!                  ─▶ Priority (priority.rs: the pod's PriorityClass must exist; its
//!                     value and preemptionPolicy are copied)
//!                  ─▶ before_create (DefaultTolerationSeconds: the pod strategy;
//!                     validation) ─▶ store
//! ```
//!
//! Which plugins miniplane has: `NamespaceLifecycle` (`handlers/create.rs`, always on),
//! `ServiceAccount` ([`serviceaccount`], on by default, switchable), `Priority` ([`priority`],
//! on by default, switchable), `DefaultTolerationSeconds` (folded into the pod strategy,
//! always on), `DefaultStorageClass`
//! ([`storageclass`], on by default, switchable). The other names of
//! Kubernetes' list are accepted by the flags and do nothing (a kubeadm command line that
//! enables `NodeRestriction` still starts); an unknown name is refused as kube-apiserver
//! refuses it.

pub mod priority;
pub mod serviceaccount;
pub mod storageclass;

use std::collections::BTreeSet;

/// The `ServiceAccount` plugin's name.
pub const SERVICE_ACCOUNT: &str = "ServiceAccount";

/// Every plugin kube-apiserver 1.33 registers, in its order (`AllOrderedPlugins`).
pub const KNOWN_PLUGINS: [&str; 36] = [
    "AlwaysAdmit",
    "NamespaceAutoProvision",
    "NamespaceLifecycle",
    "NamespaceExists",
    "LimitPodHardAntiAffinityTopology",
    "LimitRanger",
    "ServiceAccount",
    "NodeRestriction",
    "TaintNodesByCondition",
    "AlwaysPullImages",
    "ImagePolicyWebhook",
    "PodSecurity",
    "PodNodeSelector",
    "Priority",
    "DefaultTolerationSeconds",
    "PodTolerationRestriction",
    "EventRateLimit",
    "ExtendedResourceToleration",
    "DefaultStorageClass",
    "StorageObjectInUseProtection",
    "OwnerReferencesPermissionEnforcement",
    "PersistentVolumeClaimResize",
    "RuntimeClass",
    "CertificateApproval",
    "CertificateSigning",
    "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "DenyServiceExternalIPs",
    "PodTopologyLabels",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
    "AlwaysDeny",
];

/// The plugins on unless disabled (`DefaultOffAdmissionPlugins`' complement).
pub const DEFAULT_ON_PLUGINS: [&str; 22] = [
    "NamespaceLifecycle",
    "LimitRanger",
    "ServiceAccount",
    "DefaultStorageClass",
    "PersistentVolumeClaimResize",
    "DefaultTolerationSeconds",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
    "StorageObjectInUseProtection",
    "Priority",
    "TaintNodesByCondition",
    "RuntimeClass",
    "CertificateApproval",
    "CertificateSigning",
    "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "PodSecurity",
    "PodTopologyLabels",
    "MutatingAdmissionPolicy",
    "ValidatingAdmissionPolicy",
];

/// The admission plugins in force: kube-apiserver's defaults, plus
/// `--enable-admission-plugins`, less `--disable-admission-plugins`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionOptions {
    enabled: BTreeSet<&'static str>,
}

impl Default for AdmissionOptions {
    /// kube-apiserver's default plugins (`ServiceAccount` among them).
    fn default() -> Self {
        AdmissionOptions {
            enabled: DEFAULT_ON_PLUGINS.into_iter().collect(),
        }
    }
}

impl AdmissionOptions {
    /// The plugins the two flags ask for (each a list of names, repeated or comma-separated).
    /// Errors are kube-apiserver's (`AdmissionOptions.Validate`), joined with `; `.
    pub fn from_flags(enable: &[String], disable: &[String]) -> Result<Self, String> {
        let names = |list: &[String]| -> Vec<String> {
            list.iter()
                .flat_map(|s| s.split(','))
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let (enable, disable) = (names(enable), names(disable));
        let mut errors = Vec::new();
        let mut resolve = |flag: &str, list: &[String]| -> Vec<&'static str> {
            list.iter()
                .filter_map(|name| {
                    let known = KNOWN_PLUGINS.iter().copied().find(|k| k == name);
                    if known.is_none() {
                        errors.push(format!("{flag} plugin {name:?} is unknown"));
                    }
                    known
                })
                .collect()
        };
        let on = resolve("enable-admission-plugins", &enable);
        let off = resolve("disable-admission-plugins", &disable);
        let both: BTreeSet<&str> = on.iter().copied().filter(|n| off.contains(n)).collect();
        if !both.is_empty() {
            let list: Vec<&str> = both.into_iter().collect();
            errors.push(format!(
                "[{}] in enable-admission-plugins and disable-admission-plugins overlapped",
                list.join(" ")
            ));
        }
        if !errors.is_empty() {
            return Err(errors.join("; "));
        }
        let mut options = AdmissionOptions::default();
        options.enabled.extend(on);
        options.enabled.retain(|n| !off.contains(n));
        Ok(options)
    }

    /// Kubernetes' defaults without the `ServiceAccount` plugin (a server with no
    /// controller-manager to make the `default` ServiceAccounts, as test servers are).
    pub fn without_service_account() -> Self {
        let mut options = AdmissionOptions::default();
        options.enabled.remove(SERVICE_ACCOUNT);
        options
    }

    /// Whether the plugin `name` is on.
    pub fn is_enabled(&self, name: &str) -> bool {
        self.enabled.contains(name)
    }

    /// Whether the `ServiceAccount` plugin is on.
    pub fn service_account(&self) -> bool {
        self.is_enabled(SERVICE_ACCOUNT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(enable: &[&str], disable: &[&str]) -> Result<AdmissionOptions, String> {
        let owned = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        AdmissionOptions::from_flags(&owned(enable), &owned(disable))
    }

    #[test]
    fn service_account_is_on_by_default_and_can_be_disabled() {
        assert!(AdmissionOptions::default().service_account());
        assert!(flags(&[], &[]).is_ok_and(|o| o.service_account()));
        let off = flags(&["NodeRestriction"], &["ServiceAccount,PodSecurity"]);
        assert!(off.as_ref().is_ok_and(|o| !o.service_account()));
        assert!(off.is_ok_and(|o| o.is_enabled("NodeRestriction") && !o.is_enabled("PodSecurity")));
        assert!(!AdmissionOptions::without_service_account().service_account());
        assert!(DEFAULT_ON_PLUGINS.iter().all(|p| KNOWN_PLUGINS.contains(p)));
    }

    #[test]
    fn unknown_and_overlapping_names_are_refused_as_kube_apiserver_words_it() {
        assert_eq!(
            flags(&["Bogus"], &[]).err().as_deref(),
            Some("enable-admission-plugins plugin \"Bogus\" is unknown")
        );
        assert_eq!(
            flags(
                &["ServiceAccount", "Priority"],
                &["Priority,ServiceAccount"]
            )
            .err()
            .as_deref(),
            Some(
                "[Priority ServiceAccount] in enable-admission-plugins and disable-admission-plugins overlapped"
            )
        );
    }
}
