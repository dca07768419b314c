//! Group/version/kind and group/version/resource names (apimachinery's
//! `pkg/runtime/schema/group_version.go`).

use std::fmt;

/// An API group and version, e.g. `apps/v1`, or `v1` for the core group (empty group name).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersion {
    /// The group; empty for the core ("legacy") group.
    pub group: String,
    /// The version, e.g. `v1`.
    pub version: String,
}

impl GroupVersion {
    /// Builds a group/version.
    pub fn new(group: impl Into<String>, version: impl Into<String>) -> Self {
        GroupVersion {
            group: group.into(),
            version: version.into(),
        }
    }

    /// The `apiVersion` string: `v1` for core, `apps/v1` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Parses an `apiVersion` string (`v1`, `apps/v1`).
    pub fn parse_api_version(api_version: &str) -> Self {
        match api_version.split_once('/') {
            Some((g, v)) => GroupVersion::new(g, v),
            None => GroupVersion::new("", api_version),
        }
    }

    /// The URL prefix this group/version is served under: `/api/v1` or `/apis/apps/v1`.
    pub fn url_prefix(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }
}

impl fmt::Display for GroupVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.api_version())
    }
}

/// A kind in a group/version, e.g. `apps/v1 Deployment`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersionKind {
    /// The group; empty for core.
    pub group: String,
    /// The version.
    pub version: String,
    /// The kind, e.g. `Deployment`.
    pub kind: String,
}

impl GroupVersionKind {
    /// Builds a group/version/kind.
    pub fn new(
        group: impl Into<String>,
        version: impl Into<String>,
        kind: impl Into<String>,
    ) -> Self {
        GroupVersionKind {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    /// The GVK of a k8s-openapi type.
    pub fn of<K: k8s_openapi::Resource>() -> Self {
        GroupVersionKind::new(K::GROUP, K::VERSION, K::KIND)
    }

    /// The group/version part.
    pub fn group_version(&self) -> GroupVersion {
        GroupVersion::new(self.group.clone(), self.version.clone())
    }
}

impl fmt::Display for GroupVersionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, Kind={}", self.group_version(), self.kind)
    }
}

/// A resource in a group/version, e.g. `apps/v1 deployments`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersionResource {
    /// The group; empty for core.
    pub group: String,
    /// The version.
    pub version: String,
    /// The plural resource name, e.g. `deployments`.
    pub resource: String,
}

impl GroupVersionResource {
    /// Builds a group/version/resource.
    pub fn new(
        group: impl Into<String>,
        version: impl Into<String>,
        resource: impl Into<String>,
    ) -> Self {
        GroupVersionResource {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
        }
    }

    /// The group/version part.
    pub fn group_version(&self) -> GroupVersion {
        GroupVersion::new(self.group.clone(), self.version.clone())
    }

    /// The `group/resource` form Kubernetes uses in error messages (`deployments.apps`).
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}
