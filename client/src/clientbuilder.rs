//! Clients that act as a controller's own ServiceAccount: kube-controller-manager's
//! `--use-service-account-credentials`.
//!
//! Mirrors `k8s.io/controller-manager/pkg/clientbuilder` (`SAControllerClientBuilder`): the
//! manager's own identity (`system:kube-controller-manager`) may only read, create
//! ServiceAccounts in `kube-system` and ask for their tokens; each controller then writes as
//! `system:serviceaccount:kube-system:<controller>`, which the bootstrap policy's
//! `system:controller:<controller>` role is bound to:
//!
//! ```text
//!   get kube-system/<name> ServiceAccount ── 404 ─▶ create it
//!   POST serviceaccounts/<name>/token (TokenRequest) ─▶ a client with that bearer token
//! ```
//!
//! Simplification: the token is asked for once, valid for a year, instead of for an hour and
//! refreshed before it expires.

use crate::client::{ClientConfig, build_client};
use crate::error::{Error, Result};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};

/// The namespace of the controllers' ServiceAccounts.
pub const NAMESPACE: &str = "kube-system";

/// How long a controller's token is asked for (a year: see the module's simplification).
pub const TOKEN_SECONDS: i64 = 365 * 24 * 60 * 60;

/// A client that acts as the ServiceAccount `kube-system/<name>`, which `root` (the manager's
/// own client) creates when missing; `base` says where the API server is (its credentials are
/// replaced by the token).
pub async fn service_account_client(
    root: &Client,
    base: &ClientConfig,
    name: &str,
) -> Result<Client> {
    let accounts: Api<ServiceAccount> = Api::namespaced(root.clone(), NAMESPACE);
    if accounts.get_opt(name).await.map_err(Error::from)?.is_none() {
        let account = ServiceAccount {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(NAMESPACE.to_string()),
                ..ObjectMeta::default()
            },
            ..ServiceAccount::default()
        };
        match accounts.create(&PostParams::default(), &account).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(Error::from(e)),
        }
    }
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(TOKEN_SECONDS),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let answered = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .map_err(Error::from)?;
    let token = answered
        .status
        .map(|s| s.token)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            Error::KubeConfig(format!(
                "the TokenRequest for {NAMESPACE}/{name} gave no token"
            ))
        })?;
    let config = ClientConfig {
        bearer_token: Some(token),
        ..base.clone()
    };
    build_client(&config).await
}
