//! Who a request comes from: the user an authenticator found.
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/authentication/user/user.go` (`user.Info`,
//! `DefaultInfo` and the well-known names) and the ServiceAccount user names of
//! `pkg/authentication/serviceaccount/util.go`.

use std::collections::BTreeMap;

/// The group of cluster administrators: members pass every authorization check
/// (kube-apiserver's privileged-group authorizer, before RBAC).
pub const SYSTEM_MASTERS: &str = "system:masters";
/// The group every authenticated user is in.
pub const ALL_AUTHENTICATED: &str = "system:authenticated";
/// The group of requests without credentials.
pub const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user of requests without credentials.
pub const ANONYMOUS: &str = "system:anonymous";
/// The API server itself, for the requests it makes to itself (`user.APIServerUser`).
pub const API_SERVER: &str = "system:apiserver";

/// The prefix of ServiceAccount user names: `system:serviceaccount:<namespace>:<name>`.
pub const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";
/// The group of every ServiceAccount.
pub const ALL_SERVICE_ACCOUNTS: &str = "system:serviceaccounts";

/// An authenticated (or anonymous) user: name, uid, groups and extra attributes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name (`alice`, `system:node:node-0`, `system:serviceaccount:ns:sa`).
    pub name: String,
    /// A unique id, when the authenticator knows one.
    pub uid: String,
    /// The groups the user is in.
    pub groups: Vec<String>,
    /// Other attributes (e.g. a token's `authentication.kubernetes.io/credential-id`).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// A user with a name and groups.
    pub fn new(name: impl Into<String>, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..UserInfo::default()
        }
    }

    /// The user of requests without credentials.
    pub fn anonymous() -> UserInfo {
        UserInfo::new(ANONYMOUS, &[ALL_UNAUTHENTICATED])
    }

    /// The API server's own identity, for the requests it serves to itself.
    pub fn api_server() -> UserInfo {
        UserInfo::new(API_SERVER, &[SYSTEM_MASTERS])
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// Adds `system:authenticated` unless the user already is in it, is anonymous or is in
    /// `system:unauthenticated` (`group.AuthenticatedGroupAdder`).
    pub fn with_authenticated_group(mut self) -> UserInfo {
        if self.name != ANONYMOUS
            && !self.in_group(ALL_AUTHENTICATED)
            && !self.in_group(ALL_UNAUTHENTICATED)
        {
            self.groups.push(ALL_AUTHENTICATED.to_string());
        }
        self
    }

    /// `alice[group1,group2]`, as kube-apiserver writes a user in its logs.
    pub fn describe(&self) -> String {
        let name = if self.name.is_empty() {
            "<empty>"
        } else {
            &self.name
        };
        if self.groups.is_empty() {
            name.to_string()
        } else {
            format!("{name}[{}]", self.groups.join(","))
        }
    }
}

/// `system:serviceaccount:<namespace>:<name>` (`serviceaccount.MakeUsername`).
pub fn service_account_user_name(namespace: &str, name: &str) -> String {
    format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}")
}

/// The groups of a ServiceAccount: `system:serviceaccounts` and
/// `system:serviceaccounts:<namespace>` (`serviceaccount.MakeGroupNames`).
pub fn service_account_groups(namespace: &str) -> Vec<String> {
    vec![
        ALL_SERVICE_ACCOUNTS.to_string(),
        format!("{ALL_SERVICE_ACCOUNTS}:{namespace}"),
    ]
}

/// The namespace and name of a ServiceAccount user name (`serviceaccount.SplitUsername`):
/// `None` unless it is `system:serviceaccount:<ns>:<name>` with a valid namespace name and a
/// valid ServiceAccount name.
pub fn split_service_account_user_name(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix(SERVICE_ACCOUNT_PREFIX)?;
    let (namespace, name) = rest.split_once(':')?;
    let valid = !name.contains(':')
        && apimachinery::validation::is_dns1123_label(namespace).is_empty()
        && apimachinery::validation::is_dns1123_subdomain(name).is_empty();
    valid.then_some((namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authenticated_group_is_added_once_and_never_to_anonymous() {
        let alice = UserInfo::new("alice", &["dev"]).with_authenticated_group();
        assert_eq!(alice.groups, ["dev", ALL_AUTHENTICATED]);
        assert_eq!(alice.clone().with_authenticated_group(), alice);
        let anon = UserInfo::anonymous().with_authenticated_group();
        assert_eq!(anon.groups, [ALL_UNAUTHENTICATED]);
    }

    #[test]
    fn service_account_names_split_as_kubernetes_splits_them() {
        assert_eq!(
            split_service_account_user_name("system:serviceaccount:ns:builder"),
            Some(("ns", "builder"))
        );
        for bad in [
            "system:serviceaccount:ns",
            "system:serviceaccount::x",
            "system:serviceaccount:ns:",
            "system:serviceaccount:a:b:c",
            "system:serviceaccount:Ns:x",
            "alice",
        ] {
            assert_eq!(split_service_account_user_name(bad), None, "{bad}");
        }
        assert_eq!(
            service_account_user_name("ns", "builder"),
            "system:serviceaccount:ns:builder"
        );
        assert_eq!(
            service_account_groups("ns"),
            ["system:serviceaccounts", "system:serviceaccounts:ns"]
        );
    }

    #[test]
    fn users_are_described_as_in_kube_apiserver_logs() {
        assert_eq!(UserInfo::new("alice", &["a", "b"]).describe(), "alice[a,b]");
        assert_eq!(UserInfo::default().describe(), "<empty>");
    }
}
