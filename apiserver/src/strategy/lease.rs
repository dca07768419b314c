//! coordination.k8s.io/v1 Lease (`pkg/registry/coordination/lease/strategy.go`,
//! `ValidateLeaseSpec` in `pkg/apis/coordination/validation/validation.go`, and `printLease`).
//!
//! Kubelets renew a Lease per node (in `kube-node-lease`) as their heartbeat; controllers use
//! Leases for leader election.

use super::field::FieldPath;
use super::table::{age_column, column, text};
use super::typed::{KindRules, age};
use super::{FieldError, TableColumn};
use k8s_openapi::api::coordination::v1::Lease;
use serde_json::Value;

/// The Lease rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct LeaseRules;

impl KindRules for LeaseRules {
    type Object = Lease;

    fn validate(&self, obj: &Lease) -> Vec<FieldError> {
        let path = FieldPath::new("spec");
        let spec = obj.spec.clone().unwrap_or_default();
        let mut errs = Vec::new();
        if let Some(d) = spec.lease_duration_seconds.filter(|d| *d <= 0) {
            errs.push(FieldError::invalid(
                &path.child("leaseDurationSeconds"),
                d,
                "must be greater than 0",
            ));
        }
        if let Some(t) = spec.lease_transitions.filter(|t| *t < 0) {
            errs.push(FieldError::invalid(
                &path.child("leaseTransitions"),
                t,
                "must be greater than or equal to 0",
            ));
        }
        if let Some(strategy) = spec.strategy.as_deref().filter(|s| !s.is_empty())
            && strategy != "OldestEmulationVersion"
        {
            errs.push(FieldError::not_supported(
                &path.child("strategy"),
                strategy,
                &["OldestEmulationVersion"],
            ));
        }
        if spec
            .preferred_holder
            .as_deref()
            .is_some_and(|p| !p.is_empty())
            && spec.strategy.as_deref().unwrap_or("").is_empty()
        {
            errs.push(FieldError::forbidden(
                &path.child("preferredHolder"),
                "may only be specified if `strategy` is defined",
            ));
        }
        errs
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        vec![
            column(
                "Holder",
                "string",
                "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.",
                0,
            ),
            age_column(),
        ]
    }

    fn table_row(&self, obj: &Lease, now: jiff::Timestamp) -> Vec<Value> {
        let holder = obj
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.clone())
            .unwrap_or_default();
        vec![text(holder), text(age(&obj.metadata, now))]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Strategy;
    use crate::strategy::typed::Typed;
    use serde_json::json;

    #[test]
    fn validation_and_row() {
        let s = Typed(LeaseRules);
        let good = json!({"metadata": {"name": "node-1", "namespace": "kube-node-lease", "creationTimestamp": "2024-01-01T00:00:00Z"},
                          "spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40}});
        assert!(s.validate_create(&good).is_empty());
        let now: jiff::Timestamp = "2024-01-01T00:00:40Z".parse().unwrap();
        assert_eq!(s.table_row(&good, now), vec![json!("node-1"), json!("40s")]);
        let bad = json!({"metadata": {"name": "n", "namespace": "x"}, "spec": {"leaseDurationSeconds": 0, "leaseTransitions": -1}});
        let errs: Vec<String> = crate::strategy::messages(&s.validate_create(&bad));
        assert_eq!(
            errs,
            vec![
                "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
                "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
            ]
        );
    }
}
