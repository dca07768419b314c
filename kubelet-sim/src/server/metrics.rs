//! `GET /metrics/resource`: the kubelet's resource metrics in the Prometheus text format,
//! what metrics-server scrapes.
//!
//! Mirrors `pkg/kubelet/metrics/collectors/resource_metrics.go` (names, help texts,
//! stability levels, labels, timestamps taken from the Summary's sample times) as
//! component-base's registry writes them: families sorted by name, `# HELP <name> [STABLE]
//! <help>`, labels sorted by name, values as Go's `strconv.FormatFloat(v, 'g', -1, 64)`,
//! timestamps in milliseconds. `scrape_error` (deprecated in 1.29) is hidden in 1.33, so only
//! `resource_scrape_error` is written; the swap metrics are absent, as on a node without
//! swap.

use std::fmt::Write as _;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;

use super::KubeletServer;
use super::summary::{Summary, summary};

/// The content type of the Prometheus text format 0.0.4.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `GET /metrics/resource` for the node the `Host` names.
pub async fn get_resource_metrics(
    State(server): State<KubeletServer>,
    headers: HeaderMap,
) -> Response {
    let node = match server.node_for(&headers) {
        Ok(n) => n,
        Err(response) => return *response,
    };
    let now = server.clock().wall();
    let text = render(&summary(&server, &node, now), now);
    let mut response = text.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    response
}

/// One sample: its labels (sorted by name), value and optional timestamp.
type Sample = (Vec<(&'static str, String)>, f64, Option<Timestamp>);

/// The resource metrics of `summary` (sampled at `now`).
pub fn render(summary: &Summary, now: Timestamp) -> String {
    const NS: f64 = 1e9;
    let mut container_cpu: Vec<Sample> = Vec::new();
    let mut container_memory: Vec<Sample> = Vec::new();
    let mut container_start: Vec<Sample> = Vec::new();
    let mut pod_cpu: Vec<Sample> = Vec::new();
    let mut pod_memory: Vec<Sample> = Vec::new();
    for pod in &summary.pods {
        let (name, namespace) = (&pod.pod_ref.name, &pod.pod_ref.namespace);
        for c in &pod.containers {
            let labels = vec![
                ("container", c.name.clone()),
                ("namespace", namespace.clone()),
                ("pod", name.clone()),
            ];
            let start = c.start;
            if start.as_second() > 0 {
                let secs = start.as_second() as f64 + f64::from(start.subsec_nanosecond()) / NS;
                container_start.push((labels.clone(), secs, None));
            }
            container_cpu.push((
                labels.clone(),
                c.cpu.usage_core_nano_seconds as f64 / NS,
                Some(now),
            ));
            container_memory.push((labels, c.memory.working_set_bytes as f64, Some(now)));
        }
        let labels = vec![("namespace", namespace.clone()), ("pod", name.clone())];
        pod_cpu.push((
            labels.clone(),
            pod.cpu.usage_core_nano_seconds as f64 / NS,
            Some(now),
        ));
        pod_memory.push((labels, pod.memory.working_set_bytes as f64, Some(now)));
    }
    let node = &summary.node;
    let families: [(&str, &str, &str, Vec<Sample>); 8] = [
        (
            "container_cpu_usage_seconds_total",
            "Cumulative cpu time consumed by the container in core-seconds",
            "counter",
            container_cpu,
        ),
        (
            "container_memory_working_set_bytes",
            "Current working set of the container in bytes",
            "gauge",
            container_memory,
        ),
        (
            "container_start_time_seconds",
            "Start time of the container since unix epoch in seconds",
            "gauge",
            container_start,
        ),
        (
            "node_cpu_usage_seconds_total",
            "Cumulative cpu time consumed by the node in core-seconds",
            "counter",
            vec![(
                Vec::new(),
                node.cpu.usage_core_nano_seconds as f64 / NS,
                Some(now),
            )],
        ),
        (
            "node_memory_working_set_bytes",
            "Current working set of the node in bytes",
            "gauge",
            vec![(Vec::new(), node.memory.working_set_bytes as f64, Some(now))],
        ),
        (
            "pod_cpu_usage_seconds_total",
            "Cumulative cpu time consumed by the pod in core-seconds",
            "counter",
            pod_cpu,
        ),
        (
            "pod_memory_working_set_bytes",
            "Current working set of the pod in bytes",
            "gauge",
            pod_memory,
        ),
        (
            "resource_scrape_error",
            "1 if there was an error while getting container metrics, 0 otherwise",
            "gauge",
            vec![(Vec::new(), 0.0, None)],
        ),
    ];
    let mut out = String::new();
    for (name, help, kind, mut samples) in families {
        if samples.is_empty() {
            continue;
        }
        samples.sort_by(|a, b| a.0.cmp(&b.0));
        let _ = writeln!(out, "# HELP {name} [STABLE] {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (labels, value, time) in samples {
            out.push_str(name);
            if !labels.is_empty() {
                let pairs: Vec<String> = labels
                    .iter()
                    .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                    .collect();
                let _ = write!(out, "{{{}}}", pairs.join(","));
            }
            let _ = write!(out, " {}", go_float(value));
            if let Some(t) = time {
                let _ = write!(out, " {}", t.as_millisecond());
            }
            out.push('\n');
        }
    }
    out
}

/// A label value escaped as the text format escapes it (`\`, `"`, newline).
fn escape(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `strconv.FormatFloat(f, 'g', -1, 64)` as expfmt writes values: the shortest digits,
/// with an exponent (at least two digits) below 1e-4 or from 1e6 on.
pub fn go_float(f: f64) -> String {
    if f == 0.0 {
        return "0".to_owned();
    }
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    let e = format!("{f:e}");
    let Some((mantissa, exp)) = e.split_once('e') else {
        return e;
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        format!("{f}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_as_go_writes_them() {
        assert_eq!(go_float(1.0), "1");
        assert_eq!(go_float(0.0), "0");
        assert_eq!(go_float(21.66), "21.66");
        assert_eq!(go_float(123456.0), "123456");
        assert_eq!(go_float(1234567.0), "1.234567e+06");
        assert_eq!(go_float(16777216.0), "1.6777216e+07");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(go_float(0.00001234), "1.234e-05");
        assert_eq!(go_float(1.7e9), "1.7e+09");
        assert_eq!(go_float(-2.5), "-2.5");
        assert_eq!(escape("a\"b\\"), "a\\\"b\\\\");
    }
}
