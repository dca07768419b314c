//! The errors of the CLI verbs, each printed as the one line kubectl would print
//! (`k8s.io/kubectl/pkg/cmd/util/helpers.go` `StandardErrorMessage` / `CheckErr`).
//!
//! Two shapes, as in kubectl: errors the server answered with a `Status` print as
//! `Error from server (NotFound): deployments.apps "x" not found`; everything else prints as
//! `error: ...`. Either way the process exits with 1.

/// Everything a verb can fail with. `Display` is the whole line kubectl prints.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad command-line input that clap cannot catch (e.g. `TYPE NAME` forms mixed up).
    #[error("error: {0}")]
    Usage(String),
    /// `-f` names a file or directory that is not there.
    #[error("error: the path \"{0}\" does not exist")]
    PathNotFound(String),
    /// A manifest is not valid YAML/JSON or not a Kubernetes object.
    #[error("error: error parsing {source_name}: {message}")]
    Parse {
        /// The file name, or `STDIN`.
        source_name: String,
        /// What is wrong, with line and column where known.
        message: String,
    },
    /// A `TYPE` argument discovery does not know (kubectl's RESTMapper `NoResourceMatch`).
    #[error("error: the server doesn't have a resource type \"{0}\"")]
    UnknownResourceType(String),
    /// A manifest's `apiVersion`/`kind` that discovery does not know (`NoKindMatch`).
    #[error(
        "error: resource mapping not found for name: \"{name}\" namespace: \"{namespace}\" from \"{source_name}\": no matches for kind \"{kind}\" in version \"{api_version}\""
    )]
    NoKindMatch {
        /// `metadata.name` of the object.
        name: String,
        /// `metadata.namespace` of the object (may be empty).
        namespace: String,
        /// The file it came from.
        source_name: String,
        /// Its `kind`.
        kind: String,
        /// Its `apiVersion`.
        api_version: String,
    },
    /// The kubeconfig is missing, unreadable or names no usable context.
    #[error("error: {0}")]
    Kubeconfig(String),
    /// No TCP connection or HTTP exchange with the server.
    #[error("error: couldn't connect to the server at {server}: {reason}")]
    Unreachable {
        /// The cluster URL from the kubeconfig.
        server: String,
        /// The innermost cause, e.g. `connection refused`.
        reason: String,
    },
    /// The server answered with a failure `Status`.
    #[error("Error from server{}: {message}", reason_suffix(reason))]
    Server {
        /// `Status.reason`, e.g. `NotFound`.
        reason: String,
        /// `Status.message`.
        message: String,
        /// `Status.code` (HTTP status).
        code: u16,
    },
    /// A wait (`rollout status --timeout`, `delete --timeout`) ran out of time.
    #[error("error: timed out waiting for the condition")]
    Timeout,
    /// Anything else, already worded as a sentence.
    #[error("error: {0}")]
    Other(String),
    /// Errors were printed as they happened (one per object, as `apply` and `delete` do);
    /// only the exit status is left to set.
    #[error("")]
    Reported,
}

/// `Result` of the CLI verbs.
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn reason_suffix(reason: &str) -> String {
    if reason.is_empty() {
        String::new()
    } else {
        format!(" ({reason})")
    }
}

impl Error {
    /// Whether the server said the object does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Server { code: 404, .. })
    }

    /// Classifies a kube client error: a `Status` from the server, or a transport failure
    /// talking to `server` (connection refused, DNS, TLS...), or a response that is not JSON.
    pub fn from_kube(err: kube::Error, server: &str) -> Error {
        match err {
            kube::Error::Api(status) => Error::Server {
                reason: status.reason.clone(),
                message: if status.message.is_empty() {
                    format!("the server responded with the status code {}", status.code)
                } else {
                    status.message.clone()
                },
                code: status.code,
            },
            kube::Error::SerdeError(e) => Error::Other(format!(
                "the server at {server} sent a response that could not be decoded: {e}"
            )),
            other => Error::Unreachable {
                server: server.to_owned(),
                reason: root_cause(&other),
            },
        }
    }
}

/// The innermost error of a chain, as kubectl shows for dial errors: an I/O error's kind
/// (`connection refused`), otherwise the last `source()`'s message.
fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut current: &(dyn std::error::Error + 'static) = err;
    loop {
        if let Some(io) = current.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                std::io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
                std::io::ErrorKind::ConnectionReset => "connection reset by peer".to_owned(),
                std::io::ErrorKind::TimedOut => "i/o timeout".to_owned(),
                _ => io.to_string(),
            };
        }
        match current.source() {
            Some(next) => current = next,
            None => return current.to_string(),
        }
    }
}

/// Turns kube results into CLI results, naming the server for transport errors.
pub trait KubeResultExt<T> {
    /// [`Error::from_kube`] on the error.
    fn at(self, server: &str) -> Result<T>;
}

impl<T> KubeResultExt<T> for kube::Result<T> {
    fn at(self, server: &str) -> Result<T> {
        self.map_err(|e| Error::from_kube(e, server))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_print_like_kubectl() {
        let e = Error::Server {
            reason: "NotFound".into(),
            message: "deployments.apps \"x\" not found".into(),
            code: 404,
        };
        assert_eq!(
            e.to_string(),
            "Error from server (NotFound): deployments.apps \"x\" not found"
        );
        assert!(e.is_not_found());
        let e = Error::Server {
            reason: String::new(),
            message: "boom".into(),
            code: 500,
        };
        assert_eq!(e.to_string(), "Error from server: boom");
    }

    #[test]
    fn other_errors_start_with_error() {
        assert_eq!(
            Error::PathNotFound("x.yaml".into()).to_string(),
            "error: the path \"x.yaml\" does not exist"
        );
        assert_eq!(
            Error::UnknownResourceType("foos".into()).to_string(),
            "error: the server doesn't have a resource type \"foos\""
        );
    }

    #[test]
    fn root_cause_names_connection_refused() {
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(root_cause(&io), "connection refused");
    }
}
