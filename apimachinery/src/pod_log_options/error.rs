//! The errors of a log request, worded and coded as the API server and the kubelet word them:
//! `pkg/registry/core/pod/strategy.go` (`validateContainer`: 400 BadRequest),
//! `pkg/kubelet/kubelet_pods.go` `validateContainerLogStatus` (its errors reach the client as
//! 400 BadRequest from `pkg/kubelet/server/server.go`), and `ValidatePodLogOptions` in
//! `pkg/apis/core/validation` (422 Invalid, `PodLogOptions "p" is invalid: ...`).

/// The `reason` of the `Status` a client gets back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusReason {
    /// 400: a bad query value, a bad container choice, a run with no log.
    BadRequest,
    /// 422: options that fail `ValidatePodLogOptions`.
    Invalid,
}

impl StatusReason {
    /// The HTTP status code.
    pub fn code(self) -> u16 {
        match self {
            StatusReason::BadRequest => 400,
            StatusReason::Invalid => 422,
        }
    }

    /// The `Status.reason` string.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusReason::BadRequest => "BadRequest",
            StatusReason::Invalid => "Invalid",
        }
    }
}

/// A failed log request: the reason (and so the HTTP code) and Kubernetes' message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct LogError {
    /// Why (400 or 422).
    pub reason: StatusReason,
    /// The message, as Kubernetes words it.
    pub message: String,
    /// A 422's field errors, each as Kubernetes prints one (`tailLines: Invalid value: -1:
    /// must be greater than or equal to 0`); empty for a 400.
    pub causes: Vec<String>,
}

impl LogError {
    /// A 400 BadRequest with `message`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        LogError {
            reason: StatusReason::BadRequest,
            message: message.into(),
            causes: Vec::new(),
        }
    }

    /// A 422 Invalid for the options of pod `pod`: `PodLogOptions "pod" is invalid: ...`, the
    /// field errors joined as an aggregate prints them (`[a, b]` when more than one).
    pub fn invalid(pod: &str, causes: &[String]) -> Self {
        let joined = match causes {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        LogError {
            reason: StatusReason::Invalid,
            message: format!("PodLogOptions {pod:?} is invalid: {joined}"),
            causes: causes.to_vec(),
        }
    }

    /// The HTTP status code.
    pub fn code(&self) -> u16 {
        self.reason.code()
    }
}
