use super::*;

fn issuer() -> TokenIssuer {
    let (_, key) = SigningKey::generate().unwrap();
    TokenIssuer::new(key, DEFAULT_ISSUER, vec![DEFAULT_ISSUER.to_string()])
}

#[test]
fn issued_tokens_validate_until_they_expire() {
    let i = issuer();
    let auds = i.audiences().to_vec();
    let token = i
        .issue(
            ("ci", "builder", "uid-1"),
            Some(("Pod", "web", "pod-uid")),
            &auds,
            1_000,
            600,
        )
        .unwrap();
    assert!(i.is_ours(&token));
    let valid = i.validate(&token, &auds, 1_000).unwrap();
    assert_eq!(
        (
            valid.namespace.as_str(),
            valid.name.as_str(),
            valid.uid.as_str()
        ),
        ("ci", "builder", "uid-1")
    );
    assert_eq!(
        valid.bound,
        Some(("pod".into(), "web".into(), "pod-uid".into()))
    );
    assert!(!valid.id.is_empty());
    // 60 seconds of leeway after expiry, then no more.
    assert!(i.validate(&token, &auds, 1_660).is_ok());
    assert_eq!(
        i.validate(&token, &auds, 1_661).unwrap_err(),
        "service account token has expired"
    );
    assert_eq!(
        i.validate(&token, &["https://other".into()], 1_000)
            .unwrap_err(),
        "token audiences is invalid"
    );
    // Another issuer's key, or another issuer name, is not ours.
    let other = issuer();
    assert_eq!(
        other.validate(&token, &auds, 1_000).unwrap_err(),
        "invalid signature"
    );
    let (_, key) = SigningKey::generate().unwrap();
    let elsewhere = TokenIssuer::new(key, "https://elsewhere", auds.clone());
    assert!(!elsewhere.is_ours(&token));
    assert!(!i.is_ours("a-static-token"));
}

#[test]
fn keys_are_kept_in_pem_files_readable_by_their_owner_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sa.key");
    let made = TokenIssuer::load_or_create_key(&path, true).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let read = TokenIssuer::load_or_create_key(&path, true).unwrap();
    assert_eq!(made.key_id(), read.key_id());
    assert!(TokenIssuer::load_or_create_key(&dir.path().join("missing"), false).is_err());
    std::fs::write(&path, "not a key").unwrap();
    assert!(TokenIssuer::load_or_create_key(&path, false).is_err());
}
