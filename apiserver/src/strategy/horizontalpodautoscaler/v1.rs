//! The autoscaling/v1 HorizontalPodAutoscaler row's strategy: a view of the v2 objects through
//! [`super::conversion`], as kube-apiserver serves every non-storage version of a kind.
//!
//! Requests to the v1 row are served by the v2 row (`crate::handlers::converted`): bodies are
//! checked against the v1 type (unknown fields, decoding errors worded for version `v1`), then
//! converted to v2, defaulted and validated there; answers are converted back. So validation
//! errors name the v2 (internal) fields, as Kubernetes' do.

use super::super::decode::{decode, decode_noting_unknown, encode};
use super::super::{Strategy, TableColumn, VersionConversion};
use super::conversion::{v1_to_v2, v2_to_v1};
use super::printer;
use crate::gvk::GroupVersionKind;
use k8s_openapi::api::autoscaling::v1::HorizontalPodAutoscaler as V1;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler as V2;
use serde_json::Value;

/// The autoscaling/v1 HorizontalPodAutoscaler strategy (a conversion of the v2 one).
#[derive(Debug, Default, Clone, Copy)]
pub struct HorizontalPodAutoscalerV1Strategy;

impl VersionConversion for HorizontalPodAutoscalerV1Strategy {
    fn storage_gvk(&self) -> GroupVersionKind {
        GroupVersionKind::new("autoscaling", "v2", "HorizontalPodAutoscaler")
    }

    fn to_storage(&self, obj: &Value) -> Result<Value, String> {
        encode(&v1_to_v2(&decode::<V1>(obj)?))
    }

    fn to_served(&self, obj: &Value) -> Result<Value, String> {
        encode(&v2_to_v1(&decode::<V2>(obj)?))
    }
}

impl Strategy for HorizontalPodAutoscalerV1Strategy {
    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::new("autoscaling", "v1", "HorizontalPodAutoscaler")
    }

    fn has_status_subresource(&self) -> bool {
        true
    }

    /// Only checks that the body decodes as a v1 object: defaults are the v2 row's.
    fn default(&self, obj: &mut Value) -> Result<(), String> {
        decode::<V1>(obj).map(|_| ())
    }

    fn unknown_fields(&self, obj: &Value) -> Vec<String> {
        decode_noting_unknown::<V1>(obj)
            .map(|(_, unknown)| unknown)
            .unwrap_or_default()
    }

    fn check_body(&self, obj: &Value) -> (Vec<String>, Result<(), String>) {
        match decode_noting_unknown::<V1>(obj) {
            Ok((_, unknown)) => (unknown, Ok(())),
            Err(e) => (Vec::new(), Err(e)),
        }
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        printer::columns()
    }

    fn table_row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let v1 = decode::<V1>(obj).unwrap_or_default();
        printer::row(&v1_to_v2(&v1), now)
    }

    fn conversion(&self) -> Option<&dyn VersionConversion> {
        Some(self)
    }
}
