//! Label and field selectors (`?labelSelector=`, `?fieldSelector=`), parsed once at the request
//! boundary into typed requirements and matched against objects by list, watch and
//! deletecollection.
//!
//! Mirrors apimachinery's `pkg/fields/selector.go`; label selectors are the `apimachinery`
//! crate's [`apimachinery::labels::Selector`] (`pkg/labels/selector.go`).

pub mod field;

pub use field::FieldSelector;
