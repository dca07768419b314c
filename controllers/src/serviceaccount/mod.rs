//! The ServiceAccount controller: a `default` ServiceAccount in every active namespace.
//! Mirrors `pkg/controller/serviceaccount/serviceaccounts_controller.go`
//! (`ServiceAccountsController`, `syncNamespace`), run by kube-controller-manager as
//! `serviceaccount`.
//!
//! ```text
//!   Namespace informer ─ add/update ──────────▶ queue "serviceaccount" (namespace names)
//!   ServiceAccount informer ─ delete ─▶ its namespace
//!     sync(namespace): gone or not Active ─▶ nothing
//!                      each ServiceAccount to ensure (`default`) missing from the cache
//!                        ─▶ POST it (AlreadyExists, or the namespace terminating: fine)
//! ```
//!
//! The decision is [`missing`], a plain function of the namespace and the cached
//! ServiceAccounts; the async shell is [`controller`].

pub mod controller;

use k8s_openapi::api::core::v1::Namespace;

/// The ServiceAccounts ensured in every namespace (`DefaultServiceAccountsControllerOptions`).
pub const SERVICE_ACCOUNTS_TO_ENSURE: [&str; 1] = ["default"];

/// Which of the ServiceAccounts to ensure a namespace lacks, given whether each exists in the
/// cache (`exists(name)`). A namespace that is not `Active` (terminating, or with no phase
/// yet) gets none: `syncNamespace` returns early for it.
pub fn missing<'a>(namespace: &Namespace, exists: impl Fn(&str) -> bool) -> Vec<&'a str> {
    let active = namespace.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Active");
    if !active {
        return Vec::new();
    }
    SERVICE_ACCOUNTS_TO_ENSURE
        .into_iter()
        .filter(|name| !exists(name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NamespaceStatus;

    fn namespace(phase: Option<&str>) -> Namespace {
        Namespace {
            status: Some(NamespaceStatus {
                phase: phase.map(str::to_owned),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn an_active_namespace_without_default_gets_it() {
        assert_eq!(missing(&namespace(Some("Active")), |_| false), ["default"]);
        assert!(missing(&namespace(Some("Active")), |n| n == "default").is_empty());
    }

    #[test]
    fn a_terminating_or_unset_namespace_gets_nothing() {
        assert!(missing(&namespace(Some("Terminating")), |_| false).is_empty());
        assert!(missing(&namespace(None), |_| false).is_empty());
        assert!(missing(&Namespace::default(), |_| false).is_empty());
    }
}
