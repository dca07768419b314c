//! Which cluster a verb talks to, chosen as kubectl chooses it: the flags every kubectl verb
//! takes (`k8s.io/cli-runtime/pkg/genericclioptions/config_flags.go`) and the kubeconfig
//! loading rules of `k8s.io/client-go/tools/clientcmd/loader.go`.
//!
//! ```text
//!   --kubeconfig FILE  ─┐
//!   $KUBECONFIG (a:b)  ─┼─▶ the first that is set wins ─▶ context (--context, else current-context)
//!   ~/.kube/config     ─┘                                  ├─ cluster: server URL, TLS
//!                                                          ├─ user: credentials
//!   -n NS ──────────────────────────────────────────────▶  └─ namespace (else "default")
//! ```
//!
//! kube-rs does the loading and builds the HTTP client; this module only picks the inputs
//! and keeps the server URL for error messages.

use std::path::PathBuf;

use kube::api::{Api, DynamicObject};
use kube::config::{KubeConfigOptions, Kubeconfig};

use super::error::{Error, Result};
use super::restmapper::{Mapping, RestMapper};

/// The cluster flags of every verb (kubectl's `ConfigFlags`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConfigFlags {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current-context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// The namespace (default: the context's namespace, else "default").
    #[arg(short = 'n', long, value_name = "NAME")]
    pub namespace: Option<String>,
}

/// A connected client and what the kubeconfig said about it.
pub struct Session {
    /// kube's HTTP client for the chosen context.
    pub client: kube::Client,
    /// The namespace verbs default to: `-n`, else the context's, else `default`.
    pub namespace: String,
    /// Whether `-n` was given (apply refuses objects from another namespace then).
    pub namespace_explicit: bool,
    /// The cluster URL, for "couldn't connect to the server at ..." messages.
    pub server: String,
}

impl Session {
    /// Loads the kubeconfig as kubectl does and builds a client. Does not contact the server.
    pub async fn connect(flags: &ConfigFlags) -> Result<Session> {
        // kube's HTTPS connector needs a process-wide rustls crypto provider; an `Err` means
        // one is installed already, which is just as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let kubeconfig = match &flags.kubeconfig {
            Some(path) => Kubeconfig::read_from(path).map_err(|e| {
                if path.exists() {
                    Error::Kubeconfig(format!("error loading config file \"{}\": {e}", path.display()))
                } else {
                    Error::Kubeconfig(format!("stat {}: no such file or directory", path.display()))
                }
            })?,
            None => Kubeconfig::read().map_err(|_| {
                Error::Kubeconfig(
                    "no configuration has been provided: set KUBECONFIG, pass --kubeconfig, or create ~/.kube/config".to_owned(),
                )
            })?,
        };
        let options = KubeConfigOptions {
            context: flags.context.clone(),
            ..KubeConfigOptions::default()
        };
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|e| Error::Kubeconfig(format!("invalid configuration: {e}")))?;
        // As kubectl sends `kubectl/v1.33...`: the API server and the trace name the client.
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_static(concat!("miniplane/", env!("CARGO_PKG_VERSION"))),
        ));
        let server = config
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_owned();
        let namespace = flags
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = kube::Client::try_from(config)
            .map_err(|e| Error::Kubeconfig(format!("invalid configuration: {e}")))?;
        Ok(Session {
            client,
            namespace,
            namespace_explicit: flags.namespace.is_some(),
            server,
        })
    }

    /// Runs discovery (kubectl's RESTMapper); the first request a verb makes.
    pub async fn mapper(&self) -> Result<RestMapper> {
        RestMapper::discover(&self.client, &self.server).await
    }
}

impl Session {
    /// kube's dynamic `Api` for `mapping`: across all namespaces with `all_namespaces` or for
    /// cluster-scoped resources, otherwise in the session's namespace.
    pub fn api(&self, mapping: &Mapping, all_namespaces: bool) -> Api<DynamicObject> {
        if !mapping.namespaced || all_namespaces {
            Api::all_with(self.client.clone(), &mapping.resource)
        } else {
            Api::namespaced_with(self.client.clone(), &self.namespace, &mapping.resource)
        }
    }

    /// kube's dynamic `Api` for `mapping` in namespace `namespace` (ignored when
    /// cluster-scoped).
    pub fn api_in(&self, mapping: &Mapping, namespace: &str) -> Api<DynamicObject> {
        if mapping.namespaced {
            Api::namespaced_with(self.client.clone(), namespace, &mapping.resource)
        } else {
            Api::all_with(self.client.clone(), &mapping.resource)
        }
    }
}
