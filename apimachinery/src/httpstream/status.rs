//! The final status a kubelet writes on the error channel/stream of exec and attach.
//!
//! Mirrors `pkg/kubelet/cri/streaming/remotecommand/exec.go` (the `NonZeroExitCode` status)
//! and the v4+ status writer of `httpstream.go` (`v4WriteStatusFunc`: the status as JSON);
//! protocols before v4 write only the error's message as text (`v1WriteStatusFunc`).

/// Reason of the status of a command that exited non-zero (`remotecommand.NonZeroExitCodeReason`).
pub const NON_ZERO_EXIT_CODE_REASON: &str = "NonZeroExitCode";
/// Cause type carrying the exit code (`remotecommand.ExitCodeCauseType`).
pub const EXIT_CODE_CAUSE_TYPE: &str = "ExitCode";

/// The v4+ status JSON of a command that ended with `exit_code`; `command` is the argv as the
/// runtime reports it in its message (`error executing command [sh -c exit 3], exit code 3`).
pub fn exit_status_json(command: &[String], exit_code: i32) -> String {
    if exit_code == 0 {
        return r#"{"metadata":{},"status":"Success"}"#.to_string();
    }
    let message = format!(
        "command terminated with non-zero exit code: error executing command [{}], exit code {exit_code}",
        command.join(" ")
    );
    format!(
        r#"{{"metadata":{{}},"status":"Failure","message":{},"reason":"{NON_ZERO_EXIT_CODE_REASON}","details":{{"causes":[{{"reason":"{EXIT_CODE_CAUSE_TYPE}","message":"{exit_code}"}}]}}}}"#,
        go_json_string(&message)
    )
}

/// The v4+ status JSON of an internal error (`apierrors.NewInternalError`), code 500.
pub fn internal_error_json(err: &str) -> String {
    format!(
        r#"{{"metadata":{{}},"status":"Failure","message":{},"reason":"InternalError","details":{{"causes":[{{"message":{}}}]}},"code":500}}"#,
        go_json_string(&format!("Internal error occurred: {err}")),
        go_json_string(err)
    )
}

/// A JSON string as Go's `encoding/json` writes it (fields in Go's struct order above; `<`,
/// `>` and `&` escaped as `\u003c`, `\u003e`, `\u0026`).
fn go_json_string(text: &str) -> String {
    serde_json::Value::String(text.to_string())
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// What protocols before v4 write on the error stream for a non-zero exit: the message only.
pub fn exit_status_text_v1(command: &[String], exit_code: i32) -> Option<String> {
    (exit_code != 0).then(|| {
        format!(
            "command terminated with non-zero exit code: error executing command [{}], exit code {exit_code}",
            command.join(" ")
        )
    })
}

/// The exit code in a v4+ status, as client-go's `errorDecoderV4` reads it: 0 for Success,
/// the `ExitCode` cause for `NonZeroExitCode`, `None` for anything else.
pub fn exit_code_of(status_json: &[u8]) -> Option<i32> {
    let v: serde_json::Value = serde_json::from_slice(status_json).ok()?;
    match v.get("status")?.as_str()? {
        "Success" => Some(0),
        "Failure" if v.get("reason")?.as_str()? == NON_ZERO_EXIT_CODE_REASON => v
            .get("details")?
            .get("causes")?
            .as_array()?
            .iter()
            .find(|c| c.get("reason").and_then(|r| r.as_str()) == Some(EXIT_CODE_CAUSE_TYPE))?
            .get("message")?
            .as_str()?
            .parse()
            .ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_and_failure_texts() {
        let cmd = vec!["sh".to_string(), "-c".to_string(), "exit 3".to_string()];
        assert_eq!(
            exit_status_json(&cmd, 0),
            r#"{"metadata":{},"status":"Success"}"#
        );
        let failure = exit_status_json(&cmd, 3);
        let v: serde_json::Value = serde_json::from_str(&failure).unwrap();
        assert_eq!(v["status"], "Failure");
        assert_eq!(v["reason"], "NonZeroExitCode");
        assert_eq!(
            v["message"],
            "command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3"
        );
        assert_eq!(v["details"]["causes"][0]["reason"], "ExitCode");
        assert_eq!(v["details"]["causes"][0]["message"], "3");
        assert_eq!(exit_code_of(failure.as_bytes()), Some(3));
        assert_eq!(exit_code_of(exit_status_json(&cmd, 0).as_bytes()), Some(0));
        assert_eq!(
            failure,
            r#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#
        );
        let internal = internal_error_json("a <b> & c");
        assert_eq!(
            internal,
            r#"{"metadata":{},"status":"Failure","message":"Internal error occurred: a \u003cb\u003e \u0026 c","reason":"InternalError","details":{"causes":[{"message":"a \u003cb\u003e \u0026 c"}]},"code":500}"#
        );
        assert_eq!(exit_code_of(internal.as_bytes()), None);
        assert_eq!(exit_status_text_v1(&cmd, 0), None);
    }
}
