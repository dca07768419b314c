//! ServiceAccount tokens: issuing them (the TokenRequest API, `kubectl create token`) and
//! authenticating requests that carry them.
//!
//! Mirrors `pkg/serviceaccount/` (`claims.go`: the bound-token claims and their validator;
//! `jwt.go`: `JWTTokenGenerator`, `JWTTokenAuthenticator`), kube-apiserver's
//! `--service-account-signing-key-file`, `--service-account-issuer` and `--api-audiences`:
//!
//! ```text
//!   POST .../serviceaccounts/default/token {expirationSeconds, audiences, boundObjectRef}
//!     └▶ {"iss": issuer, "sub": "system:serviceaccount:ns:default", "aud": [...],
//!         "exp", "iat", "nbf", "jti", "kubernetes.io": {namespace, serviceaccount {name, uid},
//!         pod {name, uid}?, secret?, node?}}  signed ES256
//!   Authorization: Bearer <that token>
//!     └▶ signature, issuer, audience, times (60 s of leeway) ─▶ the ServiceAccount (and the
//!        bound object) must still exist with the same uid ─▶ user
//!        system:serviceaccount:ns:name, groups system:serviceaccounts[:ns], uid = SA uid
//! ```
//!
//! Simplifications: ECDSA P-256 keys only (kubeadm's `sa.key` is RSA); the key is created in
//! the data directory when no `--service-account-signing-key-file` is given.

pub mod jwt;

use super::user::{self, UserInfo};
use crate::error::{ApiError, ErrorTarget};
use crate::gvk::GroupVersion;
use crate::state::AppState;
use crate::storage::ObjectRef;
use jwt::SigningKey;
use serde_json::{Value, json};
use std::path::Path;

/// Kubernetes' default issuer and audience (what kubeadm sets).
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// How far token times may be off (go-jose's `DefaultLeeway`).
const LEEWAY_SECONDS: i64 = 60;

/// The shortest token a TokenRequest may ask for (`MinTokenAgeSec`: 10 minutes).
pub const MIN_EXPIRATION_SECONDS: i64 = 600;

/// The issuer of ServiceAccount tokens: its key, its name and the audiences the API server
/// accepts.
#[derive(Debug)]
pub struct TokenIssuer {
    key: SigningKey,
    issuer: String,
    audiences: Vec<String>,
}

/// A token whose signature, issuer, audience and times are good; whether its ServiceAccount
/// (and bound object) still exist is [`lookup`]'s to say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidToken {
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The uid the token was issued for.
    pub uid: String,
    /// The object the token is bound to: (kind, name, uid).
    pub bound: Option<(String, String, String)>,
    /// The token's id (`jti`).
    pub id: String,
}

impl TokenIssuer {
    /// An issuer with `key`.
    pub fn new(key: SigningKey, issuer: &str, audiences: Vec<String>) -> TokenIssuer {
        TokenIssuer {
            key,
            issuer: issuer.to_string(),
            audiences,
        }
    }

    /// An issuer with the key in `path` (made there first when missing and `create`).
    pub fn from_key_file(
        path: &Path,
        create: bool,
        issuer: &str,
        audiences: Vec<String>,
    ) -> Result<TokenIssuer, String> {
        let key = TokenIssuer::load_or_create_key(path, create)?;
        Ok(TokenIssuer::new(key, issuer, audiences))
    }

    /// Reads a PEM PKCS#8 EC key from `path`, or (when `create`) makes one there first.
    pub fn load_or_create_key(path: &Path, create: bool) -> Result<SigningKey, String> {
        use rustls::pki_types::PrivateKeyDer;
        use rustls::pki_types::pem::PemObject as _;
        if !path.exists() && create {
            let (pkcs8, key) = SigningKey::generate()?;
            let pem = pem_encode("PRIVATE KEY", &pkcs8);
            write_private(path, pem.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))?;
            return Ok(key);
        }
        let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        match PrivateKeyDer::from_pem_slice(&pem) {
            Ok(PrivateKeyDer::Pkcs8(der)) => SigningKey::from_pkcs8(der.secret_pkcs8_der()),
            Ok(_) => Err(format!(
                "{}: the key must be PKCS#8 (\"PRIVATE KEY\")",
                path.display()
            )),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// The audiences the API server accepts (and gives tokens by default).
    pub fn audiences(&self) -> &[String] {
        &self.audiences
    }

    /// A token for the ServiceAccount `sa` (its namespace, name, uid), bound to `bound`
    /// (kind, name, uid), valid for `expiration_seconds` from `now` (Unix seconds).
    pub fn issue(
        &self,
        sa: (&str, &str, &str),
        bound: Option<(&str, &str, &str)>,
        audiences: &[String],
        now: i64,
        expiration_seconds: i64,
    ) -> Result<String, String> {
        let (namespace, name, uid) = sa;
        let mut private = json!({
            "namespace": namespace,
            "serviceaccount": {"name": name, "uid": uid},
        });
        if let Some((kind, bound_name, bound_uid)) = bound {
            private[kind.to_ascii_lowercase()] = json!({"name": bound_name, "uid": bound_uid});
        }
        let claims = json!({
            "aud": audiences,
            "exp": now + expiration_seconds,
            "iat": now,
            "iss": self.issuer,
            "jti": uuid::Uuid::new_v4().to_string(),
            "kubernetes.io": private,
            "nbf": now,
            "sub": user::service_account_user_name(namespace, name),
        });
        self.key.sign(&claims)
    }

    /// Whether `token` claims to come from this issuer (else another authenticator's).
    pub fn is_ours(&self, token: &str) -> bool {
        jwt::unverified_claims(token).is_some_and(|c| c["iss"] == self.issuer.as_str())
    }

    /// Checks signature, issuer, audience and times of `token` at `now` (Unix seconds), with
    /// `audiences` accepted (the API server's, or a TokenReview's).
    pub fn validate(
        &self,
        token: &str,
        audiences: &[String],
        now: i64,
    ) -> Result<ValidToken, String> {
        let claims = self.key.verify(token)?;
        if claims["iss"] != self.issuer.as_str() {
            return Err("token issuer is not the service account issuer".into());
        }
        let token_audiences = match &claims["aud"] {
            Value::String(s) => vec![s.clone()],
            other => crate::meta::string_list(Some(other)),
        };
        if !token_audiences.iter().any(|a| audiences.contains(a)) {
            return Err("token audiences is invalid".into());
        }
        let time = |k: &str| claims[k].as_i64();
        if let Some(exp) = time("exp")
            && now > exp + LEEWAY_SECONDS
        {
            return Err("service account token has expired".into());
        }
        if let Some(nbf) = time("nbf")
            && now + LEEWAY_SECONDS < nbf
        {
            return Err("service account token is not valid yet".into());
        }
        let private = &claims["kubernetes.io"];
        let s = |v: &Value| v.as_str().unwrap_or("").to_string();
        let namespace = s(&private["namespace"]);
        let name = s(&private["serviceaccount"]["name"]);
        if namespace.is_empty() || name.is_empty() {
            return Err("service account token claims are missing the service account".into());
        }
        let bound = ["pod", "secret", "node"].into_iter().find_map(|kind| {
            let r = &private[kind];
            r.is_object()
                .then(|| (kind.to_string(), s(&r["name"]), s(&r["uid"])))
        });
        Ok(ValidToken {
            namespace,
            name,
            uid: s(&private["serviceaccount"]["uid"]),
            bound,
            id: s(&claims["jti"]),
        })
    }
}

/// The user of a valid token, once its ServiceAccount (and bound pod, secret or node) is
/// found with the uid the token names (the validator of `claims.go`).
pub async fn lookup(state: &AppState, token: &ValidToken) -> Result<UserInfo, String> {
    let get = |resource: &'static str, namespace: Option<String>, name: String| async move {
        let info = state
            .registry()
            .lookup(&GroupVersion::new("", "v1"), resource)
            .ok_or_else(|| format!("{resource} are not served"))?;
        let r = ObjectRef {
            info,
            namespace,
            name,
        };
        state
            .storage()
            .get(&r)
            .await
            .map_err(|e| format!("looking up {resource}: {e}"))
    };
    let sa = get(
        "serviceaccounts",
        Some(token.namespace.clone()),
        token.name.clone(),
    )
    .await?
    .ok_or_else(|| {
        format!(
            "service account {}/{} has been deleted",
            token.namespace, token.name
        )
    })?;
    let sa_uid = crate::meta::uid(&sa).unwrap_or_default().to_string();
    if sa_uid != token.uid {
        return Err(format!(
            "service account UID ({sa_uid}) does not match claim ({})",
            token.uid
        ));
    }
    let mut extra = std::collections::BTreeMap::new();
    if let Some((kind, name, uid)) = &token.bound {
        let (resource, namespace) = match kind.as_str() {
            "pod" => ("pods", Some(token.namespace.clone())),
            "secret" => ("secrets", Some(token.namespace.clone())),
            _ => ("nodes", None),
        };
        let obj = get(resource, namespace, name.clone())
            .await?
            .ok_or_else(|| format!("{kind} {}/{name} has been deleted", token.namespace))?;
        let found = crate::meta::uid(&obj).unwrap_or_default();
        if found != uid {
            return Err(format!("{kind} UID ({found}) does not match claim ({uid})"));
        }
        if kind == "pod" || kind == "node" {
            extra.insert(
                format!("authentication.kubernetes.io/{kind}-name"),
                vec![name.clone()],
            );
            extra.insert(
                format!("authentication.kubernetes.io/{kind}-uid"),
                vec![uid.clone()],
            );
        }
    }
    if !token.id.is_empty() {
        extra.insert(
            "authentication.kubernetes.io/credential-id".into(),
            vec![format!("JTI={}", token.id)],
        );
    }
    Ok(UserInfo {
        name: user::service_account_user_name(&token.namespace, &token.name),
        uid: sa_uid,
        groups: user::service_account_groups(&token.namespace),
        extra,
    }
    .with_authenticated_group())
}

/// Answers a TokenRequest (`POST .../serviceaccounts/{name}/token`): `body` is the request,
/// `now` the server's time.
pub async fn token_request(
    state: &AppState,
    namespace: &str,
    name: &str,
    mut body: Value,
) -> Result<Value, ApiError> {
    let issuer = state
        .auth()
        .options()
        .service_accounts
        .clone()
        .ok_or_else(|| {
            ApiError::Internal("no service account token issuer is configured".into())
        })?;
    let invalid = |field: &str, value: String, detail: &str| ApiError::Invalid {
        target: ErrorTarget {
            group: "authentication.k8s.io".into(),
            resource: String::new(),
            kind: "TokenRequest".into(),
            name: name.into(),
        },
        errors: vec![crate::strategy::FieldError {
            kind: crate::strategy::FieldErrorKind::Invalid,
            field: field.into(),
            value: Some(value),
            detail: detail.into(),
        }],
    };
    let meta_name = body
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !meta_name.is_empty() && meta_name != name {
        return Err(invalid(
            "metadata.name",
            format!("{meta_name:?}"),
            "must match the service account name if specified",
        ));
    }
    let meta_ns = body
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !meta_ns.is_empty() && meta_ns != namespace {
        return Err(invalid(
            "metadata.namespace",
            format!("{meta_ns:?}"),
            "must match the service account namespace if specified",
        ));
    }
    let info = state
        .registry()
        .lookup(&GroupVersion::new("", "v1"), "serviceaccounts")
        .ok_or_else(|| ApiError::Internal("serviceaccounts are not served".into()))?;
    let r = ObjectRef {
        info,
        namespace: Some(namespace.to_string()),
        name: name.to_string(),
    };
    let sa = state
        .storage()
        .get(&r)
        .await?
        .ok_or_else(|| r.not_found())?;
    let sa_uid = crate::meta::uid(&sa).unwrap_or_default().to_string();
    let spec = body.get("spec").cloned().unwrap_or(Value::Null);
    let mut audiences = crate::meta::string_list(spec.get("audiences"));
    if audiences.is_empty() {
        audiences = issuer.audiences().to_vec();
    }
    let expiration = spec
        .get("expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(3600);
    if expiration < MIN_EXPIRATION_SECONDS {
        return Err(invalid_unnamed(&invalid(
            "spec.expirationSeconds",
            expiration.to_string(),
            "may not specify a duration less than 10 minutes",
        )));
    }
    if expiration > 1 << 32 {
        return Err(invalid_unnamed(&invalid(
            "spec.expirationSeconds",
            expiration.to_string(),
            "may not specify a duration larger than 2^32 seconds",
        )));
    }
    let bound = match spec.get("boundObjectRef").filter(|b| b.is_object()) {
        None => None,
        Some(b) => Some(bound_object(state, namespace, name, b).await?),
    };
    let now = state.now();
    let token = issuer
        .issue(
            (namespace, name, &sa_uid),
            bound
                .as_ref()
                .map(|(k, n, u)| (k.as_str(), n.as_str(), u.as_str())),
            &audiences,
            now.as_second(),
            expiration,
        )
        .map_err(|e| ApiError::Internal(format!("failed to generate token: {e}")))?;
    let expires = jiff::Timestamp::from_second(now.as_second() + expiration)
        .map_err(|e| ApiError::Internal(format!("token expiry: {e}")))?;
    let obj = body.as_object_mut().ok_or_else(|| {
        ApiError::BadRequest(
            "the object provided is unrecognized (must be of type TokenRequest)".into(),
        )
    })?;
    obj.insert("kind".into(), "TokenRequest".into());
    obj.insert("apiVersion".into(), "authentication.k8s.io/v1".into());
    obj.insert(
        "metadata".into(),
        json!({"name": name, "namespace": namespace, "creationTimestamp": crate::meta::format_time(now)}),
    );
    let mut spec = spec.as_object().cloned().unwrap_or_default();
    spec.insert("audiences".into(), json!(audiences));
    spec.insert("expirationSeconds".into(), json!(expiration));
    obj.insert("spec".into(), Value::Object(spec));
    obj.insert(
        "status".into(),
        json!({"token": token, "expirationTimestamp": crate::meta::format_time(expires)}),
    );
    Ok(body)
}

/// Kubernetes validates the TokenRequest after naming it from the ServiceAccount, but reports
/// its spec errors with an empty name (`errors.NewInvalid(gvk.GroupKind(), "", errs)`).
fn invalid_unnamed(err: &ApiError) -> ApiError {
    match err {
        ApiError::Invalid { target, errors } => ApiError::Invalid {
            target: ErrorTarget {
                name: String::new(),
                ..target.clone()
            },
            errors: errors.clone(),
        },
        other => ApiError::BadRequest(other.to_string()),
    }
}

/// The object a token is to be bound to: (kind in lower case, name, uid).
async fn bound_object(
    state: &AppState,
    namespace: &str,
    sa_name: &str,
    reference: &Value,
) -> Result<(String, String, String), ApiError> {
    let s = |k: &str| {
        reference
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (api_version, kind, name, uid) = (s("apiVersion"), s("kind"), s("name"), s("uid"));
    let (resource, ns) = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Pod") => ("pods", Some(namespace.to_string())),
        ("v1", "Secret") => ("secrets", Some(namespace.to_string())),
        ("v1", "Node") => ("nodes", None),
        _ => {
            // `schema.GroupVersionKind.String()`: `group/version, Kind=kind`.
            let gv = if api_version.contains('/') {
                api_version.clone()
            } else {
                format!("/{api_version}")
            };
            return Err(ApiError::BadRequest(format!(
                "cannot bind token to object of type {gv}, Kind={kind}"
            )));
        }
    };
    let info = state
        .registry()
        .lookup(&GroupVersion::new("", "v1"), resource)
        .ok_or_else(|| ApiError::Internal(format!("{resource} are not served")))?;
    let r = ObjectRef {
        info,
        namespace: ns,
        name: name.clone(),
    };
    let obj = state
        .storage()
        .get(&r)
        .await?
        .ok_or_else(|| r.not_found())?;
    if kind == "Pod" {
        let pod_sa = obj
            .pointer("/spec/serviceAccountName")
            .and_then(Value::as_str)
            .unwrap_or("");
        if pod_sa != sa_name {
            return Err(ApiError::BadRequest(format!(
                "cannot bind token for serviceaccount {sa_name:?} to pod running with different serviceaccount name."
            )));
        }
    }
    let found = crate::meta::uid(&obj).unwrap_or_default().to_string();
    if !uid.is_empty() && uid != found {
        return Err(ApiError::Conflict {
            target: ErrorTarget {
                group: String::new(),
                resource: kind.clone(),
                kind: kind.clone(),
                name: name.clone(),
            },
            detail: format!(
                "the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
            ),
        });
    }
    Ok((kind.to_ascii_lowercase(), name, found))
}

/// Writes a private key file readable by its owner only.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// PEM armour of DER bytes.
fn pem_encode(label: &str, der: &[u8]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[cfg(test)]
mod tests;
