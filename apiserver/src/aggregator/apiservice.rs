//! `apiregistration.k8s.io/v1` APIService: defaulting, validation, the create-time status and
//! the `kubectl get apiservice` table.
//!
//! Mirrors kube-aggregator's `pkg/apis/apiregistration/v1/defaults.go`
//! (`SetDefaults_ServiceReference`), `pkg/apis/apiregistration/validation/validation.go`
//! (`ValidateAPIService`), `pkg/registry/apiservice/strategy.go` (`PrepareForCreate` marks a
//! local APIService Available at once) and `pkg/registry/apiservice/etcd/etcd.go`
//! (`ConvertToTable`: NAME, SERVICE, AVAILABLE, AGE).
//!
//! ```text
//!   defaults   spec.service.port: 443
//!   create     name == spec.version + "." + spec.group (a path segment first)
//!              spec.group: "" only for version v1, else a DNS-1123 subdomain
//!              spec.version: a DNS-1035 label
//!              groupPriorityMinimum in 1..=20000, versionPriority in 1..=1000
//!              local (no service): no caBundle, no insecureSkipTLSVerify
//!              service: namespace and name required; not insecureSkipTLSVerify with a caBundle
//!   status     reset on create; local ones start Available=True (reason Local)
//! ```

use crate::strategy::field::FieldPath;
use crate::strategy::table::{age_column, column, text};
use crate::strategy::typed::{KindRules, age};
use crate::strategy::{FieldError, TableColumn};
use apimachinery::validation::{NameRule, is_dns1035_label, is_dns1123_subdomain};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::{
    APIService, APIServiceCondition, APIServiceStatus,
};
use serde_json::Value;

/// The condition type the aggregator keeps.
pub const AVAILABLE: &str = "Available";
/// The reason of a local APIService's condition.
pub const LOCAL_REASON: &str = "Local";
/// The message of a local APIService's condition.
pub const LOCAL_MESSAGE: &str = "Local APIServices are always available";
/// `spec.service.port` when unset.
pub const DEFAULT_PORT: i32 = 443;

/// The name an APIService must have: `<version>.<group>` (`v1.` for the legacy group).
pub fn required_name(group: &str, version: &str) -> String {
    format!("{version}.{group}")
}

/// `NewLocalAvailableAPIServiceCondition`, at `now`.
pub fn local_condition(now: jiff::Timestamp) -> APIServiceCondition {
    APIServiceCondition {
        type_: AVAILABLE.to_owned(),
        status: "True".to_owned(),
        reason: Some(LOCAL_REASON.to_owned()),
        message: Some(LOCAL_MESSAGE.to_owned()),
        last_transition_time: Some(Time(now)),
    }
}

/// The `Available` condition of `svc`, if any.
pub fn available_condition(svc: &APIService) -> Option<&APIServiceCondition> {
    svc.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == AVAILABLE)
}

/// `SetAPIServiceCondition`: replaces the condition of the same type, keeping its
/// `lastTransitionTime` unless its status changes.
pub fn set_condition(status: &mut APIServiceStatus, new: APIServiceCondition) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        None => conditions.push(new),
        Some(existing) => {
            if existing.status != new.status {
                existing.status = new.status;
                existing.last_transition_time = new.last_transition_time;
            }
            existing.reason = new.reason;
            existing.message = new.message;
        }
    }
}

/// The APIService rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct APIServiceRules;

impl KindRules for APIServiceRules {
    type Object = APIService;

    const NAME_RULE: NameRule = NameRule::PathSegment;
    const STATUS_SUBRESOURCE: bool = true;

    fn set_defaults(&self, obj: &mut APIService) {
        if let Some(service) = obj.spec.as_mut().and_then(|s| s.service.as_mut()) {
            service.port.get_or_insert(DEFAULT_PORT);
        }
    }

    fn prepare_for_create(&self, obj: &mut APIService) {
        obj.status = Some(APIServiceStatus::default());
        if obj.spec.as_ref().is_none_or(|s| s.service.is_none()) {
            let mut status = APIServiceStatus::default();
            set_condition(&mut status, local_condition(jiff::Timestamp::now()));
            obj.status = Some(status);
        }
    }

    fn reset_status(&self, obj: &mut APIService) -> bool {
        obj.status = Some(APIServiceStatus::default());
        true
    }

    fn validate(&self, obj: &APIService) -> Vec<FieldError> {
        let spec = obj.spec.clone().unwrap_or_default();
        let group = spec.group.clone().unwrap_or_default();
        let version = spec.version.clone().unwrap_or_default();
        let mut errs = Vec::new();
        let name = obj.metadata.name.as_deref().unwrap_or_default();
        let required = required_name(&group, &version);
        if !name.is_empty()
            && NameRule::PathSegment.check(name, false).is_empty()
            && name != required
        {
            errs.push(FieldError::invalid(
                &FieldPath::new("metadata").child("name"),
                name,
                &format!(
                    "must be `spec.version+\".\"+spec.group`: {}",
                    apimachinery::fmt::go_quote(&required)
                ),
            ));
        }
        let spec_path = FieldPath::new("spec");
        if group.is_empty() && version != "v1" {
            errs.push(FieldError::required(
                &spec_path.child("group"),
                "only v1 may have an empty group and it better be legacy kube",
            ));
        }
        if !group.is_empty() {
            for msg in is_dns1123_subdomain(&group) {
                errs.push(FieldError::invalid(
                    &spec_path.child("group"),
                    group.as_str(),
                    &msg,
                ));
            }
        }
        for msg in is_dns1035_label(&version) {
            errs.push(FieldError::invalid(
                &spec_path.child("version"),
                version.as_str(),
                &msg,
            ));
        }
        if spec.group_priority_minimum <= 0 || spec.group_priority_minimum > 20000 {
            errs.push(FieldError::invalid(
                &spec_path.child("groupPriorityMinimum"),
                spec.group_priority_minimum,
                "must be positive and less than 20000",
            ));
        }
        if spec.version_priority <= 0 || spec.version_priority > 1000 {
            errs.push(FieldError::invalid(
                &spec_path.child("versionPriority"),
                spec.version_priority,
                "must be positive and less than 1000",
            ));
        }
        let ca_bundle = spec.ca_bundle.as_ref().map_or(0, |b| b.0.len());
        let insecure = spec.insecure_skip_tls_verify.unwrap_or(false);
        let Some(service) = &spec.service else {
            if ca_bundle != 0 {
                errs.push(FieldError::invalid(
                    &spec_path.child("caBundle"),
                    format!("{ca_bundle} bytes"),
                    "local APIServices may not have a caBundle",
                ));
            }
            if insecure {
                errs.push(FieldError::invalid(
                    &spec_path.child("insecureSkipTLSVerify"),
                    insecure,
                    "local APIServices may not have insecureSkipTLSVerify",
                ));
            }
            return errs;
        };
        let service_path = spec_path.child("service");
        if service.namespace.as_deref().unwrap_or_default().is_empty() {
            errs.push(FieldError::required(&service_path.child("namespace"), ""));
        }
        if service.name.as_deref().unwrap_or_default().is_empty() {
            errs.push(FieldError::required(&service_path.child("name"), ""));
        }
        if insecure && ca_bundle > 0 {
            errs.push(FieldError::invalid(
                &spec_path.child("insecureSkipTLSVerify"),
                insecure,
                "may not be true if caBundle is present",
            ));
        }
        errs
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        vec![
            column(
                "Service",
                "string",
                "The reference to the service that hosts this API endpoint.",
                0,
            ),
            column(
                "Available",
                "string",
                "Whether this service is available.",
                0,
            ),
            age_column(),
        ]
    }

    fn table_row(&self, obj: &APIService, now: jiff::Timestamp) -> Vec<Value> {
        let service = match obj.spec.as_ref().and_then(|s| s.service.as_ref()) {
            Some(s) => format!(
                "{}/{}",
                s.namespace.as_deref().unwrap_or_default(),
                s.name.as_deref().unwrap_or_default()
            ),
            None => "Local".to_owned(),
        };
        let available = match available_condition(obj) {
            None => "Unknown".to_owned(),
            Some(c) if c.status == "True" => c.status.clone(),
            Some(c) => match c.reason.as_deref().filter(|r| !r.is_empty()) {
                Some(reason) => format!("{} ({reason})", c.status),
                None => c.status.clone(),
            },
        };
        vec![
            text(service),
            text(available),
            text(age(&obj.metadata, now)),
        ]
    }
}
