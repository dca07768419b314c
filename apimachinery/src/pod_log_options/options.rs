//! `PodLogOptions` (k8s.io/api `core/v1/types.go`) read from the query of `pods/log` (and of the
//! kubelet's `/containerLogs`), validated as `pkg/apis/core/validation` `ValidatePodLogOptions`
//! validates them. A value that does not decode (`tailLines=x`) is a 400 BadRequest; a value
//! that decodes but is out of range is a 422 Invalid with the field errors' wording.

use jiff::Timestamp;

use super::error::LogError;

/// The options of one log request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    /// `container`: empty to let the pod choose (its only container).
    pub container: String,
    /// `follow`: keep streaming until the container exits.
    pub follow: bool,
    /// `previous`: the log of the previous, terminated run.
    pub previous: bool,
    /// `sinceSeconds`: lines from this many seconds before now.
    pub since_seconds: Option<i64>,
    /// `sinceTime` (RFC3339): lines at or after this time.
    pub since_time: Option<Timestamp>,
    /// `timestamps`: prefix each line with its RFC3339Nano time.
    pub timestamps: bool,
    /// `tailLines`: only the last N lines.
    pub tail_lines: Option<i64>,
    /// `limitBytes`: stop after this many bytes.
    pub limit_bytes: Option<i64>,
    /// `insecureSkipTLSVerifyBackend`: accepted and ignored (no TLS to a simulated node).
    pub insecure_skip_tls_verify_backend: bool,
    /// `stream`: only `All` is accepted (the split per stream is alpha in 1.33).
    pub stream: Option<String>,
}

/// `isNegativeErrorMsg` of `apimachinery/pkg/api/validation`.
const NEGATIVE: &str = "must be greater than or equal to 0";

impl LogOptions {
    /// Reads the options from a URL query (`follow=true&tailLines=10`, percent-encoded, without
    /// the `?`) and validates them; `pod` names the pod in a 422's message.
    pub fn parse(query: &str, pod: &str) -> Result<Self, LogError> {
        let mut o = LogOptions::default();
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            let (key, value) = (key.into_owned(), value.into_owned());
            match key.as_str() {
                "container" => o.container = value,
                "follow" => o.follow = boolean(&key, &value)?,
                "previous" => o.previous = boolean(&key, &value)?,
                "timestamps" => o.timestamps = boolean(&key, &value)?,
                "insecureSkipTLSVerifyBackend" => {
                    o.insecure_skip_tls_verify_backend = boolean(&key, &value)?
                }
                "sinceSeconds" => o.since_seconds = Some(integer(&key, &value)?),
                "tailLines" => o.tail_lines = Some(integer(&key, &value)?),
                "limitBytes" => o.limit_bytes = Some(integer(&key, &value)?),
                "sinceTime" => {
                    o.since_time = Some(value.parse::<Timestamp>().map_err(|_| {
                        LogError::bad_request(format!(
                            "sinceTime: {value:?} is not an RFC3339 time"
                        ))
                    })?)
                }
                "stream" => o.stream = Some(value),
                // Unknown parameters are dropped, as the query decoder drops them.
                _ => {}
            }
        }
        o.validate(pod)?;
        Ok(o)
    }

    /// `ValidatePodLogOptions`: the field errors, as one 422.
    pub fn validate(&self, pod: &str) -> Result<(), LogError> {
        let mut causes = Vec::new();
        if let Some(n) = self.tail_lines.filter(|n| *n < 0) {
            causes.push(format!("tailLines: Invalid value: {n}: {NEGATIVE}"));
        }
        if let Some(n) = self.limit_bytes.filter(|n| *n < 1) {
            causes.push(format!(
                "limitBytes: Invalid value: {n}: must be greater than 0"
            ));
        }
        match (self.since_seconds, self.since_time) {
            (Some(_), Some(_)) => causes.push(
                "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"
                    .to_owned(),
            ),
            (Some(n), None) if n < 1 => causes.push(format!(
                "sinceSeconds: Invalid value: {n}: must be greater than 0"
            )),
            _ => {}
        }
        match self.stream.as_deref() {
            None | Some("All") => {}
            Some(_) => causes.push("stream: Forbidden: may not be specified".to_owned()),
        }
        if causes.is_empty() {
            Ok(())
        } else {
            Err(LogError::invalid(pod, &causes))
        }
    }
}

/// Go's `strconv.ParseBool` (what the query decoder uses); an empty value is false.
fn boolean(key: &str, value: &str) -> Result<bool, LogError> {
    match value {
        "" | "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        _ => Err(LogError::bad_request(format!(
            "{key}: strconv.ParseBool: parsing {value:?}: invalid syntax"
        ))),
    }
}

/// A base-10 `int64`, as `strconv.ParseInt` reads it.
fn integer(key: &str, value: &str) -> Result<i64, LogError> {
    value.parse().map_err(|_| {
        LogError::bad_request(format!(
            "{key}: strconv.ParseInt: parsing {value:?}: invalid syntax"
        ))
    })
}
