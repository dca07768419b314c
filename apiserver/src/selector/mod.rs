//! Label and field selectors (`?labelSelector=`, `?fieldSelector=`), parsed once at the request
//! boundary into typed requirements and matched against objects by list, watch and
//! deletecollection.
//!
//! Mirrors apimachinery's `pkg/labels/selector.go` and `pkg/fields/selector.go`.

pub mod field;
pub mod label;

pub use field::FieldSelector;
pub use label::LabelSelector;
