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
        client_ca: None,
        service_accounts: None,
    })
}

/// The user of an authentication that found one (not a ServiceAccount token).
fn user_of(found: Result<Authenticated, String>) -> UserInfo {
    match found {
        Ok(Authenticated::User(u)) => u,
        other => panic!("expected a user, got {other:?}"),
    }
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
    let alice = user_of(a.authenticate(&bearer("alice-token"), None));
    assert_eq!(alice.name, "alice");
    assert_eq!(alice.uid, "1001");
    assert_eq!(alice.groups, ["dev", "system:authenticated"]);
    assert_eq!(
        user_of(a.authenticate(&HeaderMap::new(), None)),
        UserInfo::anonymous()
    );
    // A token that is not known is an error, not an anonymous request.
    assert_eq!(
        a.authenticate(&bearer("nope"), None).unwrap_err(),
        "invalid bearer token"
    );
    // Without anonymous requests, no credentials is an error too.
    let strict = auth(AuthorizationMode::Rbac, false);
    assert!(strict.authenticate(&HeaderMap::new(), None).is_err());
    // A scheme other than Bearer is ignored.
    let mut basic = HeaderMap::new();
    basic.insert(
        header::AUTHORIZATION,
        HeaderValue::from_static("Basic YWxpY2U6cHc="),
    );
    assert_eq!(user_of(a.authenticate(&basic, None)), UserInfo::anonymous());
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

#[test]
fn client_certificates_give_their_common_name_and_organizations() {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let ca = apimachinery::pki::Ca::generate_in_memory(apimachinery::pki::Validity::default_cert())
        .unwrap();
    let other =
        apimachinery::pki::Ca::generate_in_memory(apimachinery::pki::Validity::default_cert())
            .unwrap();
    let a = Auth::new(AuthOptions {
        client_ca: Some(Arc::new(ca.cert_der().to_vec())),
        ..AuthOptions::default()
    });
    let peer = |ca: &apimachinery::pki::Ca, cn: &str, orgs: &[&str]| {
        let issued = ca
            .issue_client(cn, orgs, apimachinery::pki::Validity::default_cert())
            .unwrap();
        let der = CertificateDer::from_pem_slice(issued.cert_pem.as_bytes()).unwrap();
        crate::PeerCertificates(Arc::new(vec![der.into_owned()]))
    };
    let carol = user_of(a.authenticate(
        &HeaderMap::new(),
        Some(&peer(&ca, "carol", &["dev", "ops"])),
    ));
    assert_eq!(carol.name, "carol");
    assert_eq!(carol.groups, ["dev", "ops", user::ALL_AUTHENTICATED]);
    // A certificate of another CA is refused even with a good token beside it.
    let err = a
        .authenticate(&bearer("anything"), Some(&peer(&other, "mallory", &[])))
        .unwrap_err();
    assert!(err.contains("unknown authority"), "{err}");
    // Without a client CA, certificates are not looked at.
    let plain = Auth::new(AuthOptions::default());
    let anon = user_of(plain.authenticate(&HeaderMap::new(), Some(&peer(&ca, "carol", &[]))));
    assert_eq!(anon, UserInfo::anonymous());
}

#[test]
fn the_ui_logs_in_with_its_token_and_then_sends_the_cookie() {
    let a = auth(AuthorizationMode::Rbac, true);
    let cookie = ui_login(&a, "/ui", Some("token=admin-token"), true)
        .unwrap()
        .unwrap();
    assert_eq!(
        cookie,
        "miniplane-token=admin-token; Path=/; HttpOnly; SameSite=Strict; Secure"
    );
    assert!(matches!(
        ui_login(&a, "/ui", Some("token=wrong"), true),
        Some(Err(ApiError::Unauthorized))
    ));
    assert!(ui_login(&a, "/ui/app.js", Some("token=admin-token"), true).is_none());
    assert!(ui_login(&a, "/ui", None, true).is_none());
    let mut h = HeaderMap::new();
    h.insert(
        header::COOKIE,
        HeaderValue::from_static("other=1; miniplane-token=admin-token"),
    );
    assert_eq!(user_of(a.authenticate(&h, None)).name, "admin");
    h.insert(
        header::COOKIE,
        HeaderValue::from_static("miniplane-token=forged"),
    );
    assert!(a.authenticate(&h, None).is_err());
}
