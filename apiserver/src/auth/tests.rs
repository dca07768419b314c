use super::*;
use axum::http::{HeaderValue, Method};

fn auth(mode: AuthorizationMode, anonymous: bool) -> Auth {
    let tokens = TokenFile::parse(
        "alice-token,alice,1001,dev\nadmin-token,admin,1,system:masters\n",
        "t",
    )
    .unwrap();
    Auth::new(AuthOptions {
        authorization_mode: mode,
        anonymous,
        tokens: Some(Arc::new(tokens)),
    })
}

fn bearer(token: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        header::AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
    );
    h
}

#[test]
fn bearer_tokens_anonymous_requests_and_bad_tokens() {
    let a = auth(AuthorizationMode::Rbac, true);
    let alice = a.authenticate(&bearer("alice-token")).unwrap();
    assert_eq!(alice.name, "alice");
    assert_eq!(alice.uid, "1001");
    assert_eq!(alice.groups, ["dev", "system:authenticated"]);
    assert_eq!(
        a.authenticate(&HeaderMap::new()).unwrap(),
        UserInfo::anonymous()
    );
    // A token that is not known is an error, not an anonymous request.
    assert_eq!(
        a.authenticate(&bearer("nope")).unwrap_err(),
        "invalid bearer token"
    );
    // Without anonymous requests, no credentials is an error too.
    let strict = auth(AuthorizationMode::Rbac, false);
    assert!(strict.authenticate(&HeaderMap::new()).is_err());
    // A scheme other than Bearer is ignored.
    let mut basic = HeaderMap::new();
    basic.insert(
        header::AUTHORIZATION,
        HeaderValue::from_static("Basic YWxpY2U6cHc="),
    );
    assert_eq!(a.authenticate(&basic).unwrap(), UserInfo::anonymous());
}

#[test]
fn masters_and_always_allow_pass_and_rbac_refuses_without_a_binding() {
    let a = auth(AuthorizationMode::Rbac, true);
    let attrs = |user: UserInfo| {
        Attributes::of_request(user, &Method::GET, "/api/v1/namespaces/default/pods", None)
    };
    assert!(
        a.authorize(&attrs(UserInfo::new("root", &[user::SYSTEM_MASTERS])))
            .allowed
    );
    assert!(!a.authorize(&attrs(UserInfo::new("alice", &[]))).allowed);
    let open = auth(AuthorizationMode::AlwaysAllow, true);
    assert!(open.authorize(&attrs(UserInfo::anonymous())).allowed);
}

#[test]
fn forbidden_messages_read_as_kubernetes_writes_them() {
    let alice = UserInfo::new("alice", &[]);
    let cases = [
        (
            Method::GET,
            "/api/v1/namespaces/default/pods",
            "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\"",
        ),
        (
            Method::GET,
            "/api/v1/nodes/n1",
            "nodes \"n1\" is forbidden: User \"alice\" cannot get resource \"nodes\" in API group \"\" at the cluster scope",
        ),
        (
            Method::PATCH,
            "/apis/apps/v1/namespaces/d/deployments/web/scale",
            "deployments.apps \"web\" is forbidden: User \"alice\" cannot patch resource \"deployments/scale\" in API group \"apps\" in the namespace \"d\"",
        ),
        (
            Method::GET,
            "/api",
            "forbidden: User \"alice\" cannot get path \"/api\"",
        ),
    ];
    for (method, path, message) in cases {
        let attrs = Attributes::of_request(alice.clone(), &method, path, None);
        let err = forbidden(&attrs, "");
        assert_eq!(err.to_string(), message);
        assert_eq!(err.code(), axum::http::StatusCode::FORBIDDEN);
    }
    let attrs = Attributes::of_request(alice, &Method::GET, "/api/v1/pods", None);
    let status = forbidden(
        &attrs,
        "RBAC: clusterrole.rbac.authorization.k8s.io \"x\" not found",
    )
    .to_status();
    assert_eq!(
        status["message"],
        "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io \"x\" not found"
    );
    assert_eq!(status["details"], serde_json::json!({"kind": "pods"}));
    assert_eq!(status["reason"], "Forbidden");
}

fn impersonating(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(
            axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    h
}

#[test]
fn impersonation_needs_the_impersonate_verb_for_each_name() {
    let a = auth(AuthorizationMode::Rbac, true);
    let admin = UserInfo::new("admin", &[user::SYSTEM_MASTERS, user::ALL_AUTHENTICATED]);
    let mut h = impersonating(&[
        ("Impersonate-User", "bob"),
        ("Impersonate-Group", "dev"),
        ("Impersonate-Extra-Scopes", "view"),
    ]);
    let acting = a.impersonate(&admin, &mut h).unwrap().unwrap();
    assert_eq!(acting.name, "bob");
    assert_eq!(acting.groups, ["dev", user::ALL_AUTHENTICATED]);
    assert_eq!(acting.extra["scopes"], ["view"]);
    assert!(h.is_empty(), "the impersonation headers are removed: {h:?}");

    let mut h = impersonating(&[("Impersonate-User", "system:serviceaccount:ci:builder")]);
    let acting = a.impersonate(&admin, &mut h).unwrap().unwrap();
    assert_eq!(
        acting.groups,
        [
            "system:serviceaccounts",
            "system:serviceaccounts:ci",
            user::ALL_AUTHENTICATED
        ]
    );

    let alice = UserInfo::new("alice", &[user::ALL_AUTHENTICATED]);
    let mut h = impersonating(&[("Impersonate-User", "bob")]);
    match a.impersonate(&alice, &mut h) {
        Err(Refusal::Forbidden(e)) => assert_eq!(
            e.to_string(),
            "users \"bob\" is forbidden: User \"alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        ),
        other => panic!("{other:?}"),
    }
    let mut h = impersonating(&[("Impersonate-Group", "dev")]);
    assert!(matches!(
        a.impersonate(&admin, &mut h),
        Err(Refusal::Malformed(_))
    ));
    let mut h = HeaderMap::new();
    assert!(a.impersonate(&alice, &mut h).unwrap().is_none());
}
