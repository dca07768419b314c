//! A kubelet's `/metrics/resource` answer (the Prometheus text format) read into one batch
//! of metric points: the node's and each pod's containers'.
//!
//! Mirrors metrics-server's `pkg/scraper/client/resource/decode.go` (`decodeBatch`): the
//! series `node_cpu_usage_seconds_total`, `node_memory_working_set_bytes`,
//! `container_cpu_usage_seconds_total`, `container_memory_working_set_bytes` and
//! `container_start_time_seconds`; CPU seconds become nanoseconds, sample timestamps
//! (milliseconds) the point's time (the scrape's time when a sample has none). A node point
//! without a timestamp, CPU or memory is dropped; so is a whole pod when one of its
//! containers has a zero CPU counter or working set. Other series are ignored. The text
//! parser reads only what this needs: `name{label="value",...} value [timestamp]` lines,
//! comments skipped, label values unescaped.

use std::collections::{BTreeMap, HashMap};

use jiff::Timestamp;

/// One point: a node's or a container's cumulative CPU and working set at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MetricsPoint {
    /// When the container (or node) started; cumulative CPU is zero then.
    pub start_time: Option<Timestamp>,
    /// When the point was measured.
    pub timestamp: Option<Timestamp>,
    /// CPU used since the start, in core-nanoseconds.
    pub cumulative_cpu_used: u64,
    /// The working set, in bytes.
    pub memory_usage: u64,
}

/// A pod's name and namespace.
pub type PodRef = (String, String);

/// The points of one scrape: by node name, and by pod (`(namespace, name)`) then container.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricsBatch {
    /// Node points.
    pub nodes: HashMap<String, MetricsPoint>,
    /// Container points of each pod.
    pub pods: HashMap<PodRef, BTreeMap<String, MetricsPoint>>,
}

/// One sample line: the series name, its labels, value and optional timestamp (ms).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The metric's name.
    pub name: String,
    /// Its labels, in the order written.
    pub labels: Vec<(String, String)>,
    /// The value.
    pub value: f64,
    /// The timestamp in milliseconds since 1970, if written.
    pub timestamp_ms: Option<i64>,
}

impl Sample {
    fn label(&self, key: &str) -> &str {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map_or("", |(_, v)| v.as_str())
    }
}

/// Parses one sample line (`None` for blank lines, comments and lines it cannot read).
pub fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace())?;
    let name = line[..name_end].to_owned();
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let mut chars = after.char_indices().peekable();
        let mut consumed = None;
        loop {
            while chars
                .peek()
                .is_some_and(|(_, c)| *c == ',' || c.is_whitespace())
            {
                chars.next();
            }
            match chars.peek() {
                Some((i, '}')) => {
                    consumed = Some(*i + 1);
                    break;
                }
                None => break,
                _ => {}
            }
            let mut key = String::new();
            while let Some((_, c)) = chars.peek() {
                if *c == '=' {
                    break;
                }
                key.push(*c);
                chars.next();
            }
            chars.next(); // '='
            if chars.next().map(|(_, c)| c) != Some('"') {
                return None;
            }
            let mut value = String::new();
            loop {
                match chars.next()? {
                    (_, '\\') => match chars.next()? {
                        (_, 'n') => value.push('\n'),
                        (_, other) => value.push(other),
                    },
                    (_, '"') => break,
                    (_, c) => value.push(c),
                }
            }
            labels.push((key.trim().to_owned(), value));
        }
        rest = &after[consumed?..];
    }
    let mut fields = rest.split_whitespace();
    let value = parse_value(fields.next()?)?;
    let timestamp_ms = fields.next().and_then(|t| t.parse::<i64>().ok());
    Some(Sample {
        name,
        labels,
        value,
        timestamp_ms,
    })
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

fn time_ms(ms: i64) -> Option<Timestamp> {
    Timestamp::from_millisecond(ms).ok()
}

/// Seconds as core-nanoseconds (`uint64(value * 1e9)`).
fn nanos(seconds: f64) -> u64 {
    let n = seconds * 1e9;
    if n.is_finite() && n > 0.0 {
        n as u64
    } else {
        0
    }
}

/// `decodeBatch`: the points in `text`, scraped from `node` at `scraped_at`.
pub fn decode_batch(text: &str, scraped_at: Timestamp, node: &str) -> MetricsBatch {
    let default_ms = scraped_at.as_millisecond();
    let mut node_point = MetricsPoint::default();
    let mut pods: HashMap<PodRef, BTreeMap<String, MetricsPoint>> = HashMap::new();
    for sample in text.lines().filter_map(parse_line) {
        let at = time_ms(sample.timestamp_ms.unwrap_or(default_ms));
        match sample.name.as_str() {
            "node_cpu_usage_seconds_total" => {
                node_point.cumulative_cpu_used = nanos(sample.value);
                node_point.timestamp = at;
            }
            "node_memory_working_set_bytes" => {
                node_point.memory_usage = sample.value.max(0.0) as u64;
                node_point.timestamp = at;
            }
            "container_cpu_usage_seconds_total" => {
                let point = container_point(&mut pods, &sample);
                point.cumulative_cpu_used = nanos(sample.value);
                point.timestamp = at;
            }
            "container_memory_working_set_bytes" => {
                let point = container_point(&mut pods, &sample);
                point.memory_usage = sample.value.max(0.0) as u64;
                point.timestamp = at;
            }
            "container_start_time_seconds" => {
                let point = container_point(&mut pods, &sample);
                point.start_time = Timestamp::from_nanosecond((sample.value * 1e9) as i128).ok();
            }
            _ => {}
        }
    }
    let mut batch = MetricsBatch::default();
    if node_point.timestamp.is_some()
        && node_point.cumulative_cpu_used != 0
        && node_point.memory_usage != 0
    {
        batch.nodes.insert(node.to_owned(), node_point);
    } else {
        tracing::debug!(node, "failed getting complete node metric");
    }
    for (pod, containers) in pods {
        if let Some(kept) = check_container_metrics(containers) {
            batch.pods.insert(pod, kept);
        }
    }
    batch
}

fn container_point<'a>(
    pods: &'a mut HashMap<PodRef, BTreeMap<String, MetricsPoint>>,
    sample: &Sample,
) -> &'a mut MetricsPoint {
    let pod = (
        sample.label("namespace").to_owned(),
        sample.label("pod").to_owned(),
    );
    pods.entry(pod)
        .or_default()
        .entry(sample.label("container").to_owned())
        .or_default()
}

/// `checkContainerMetrics`: the containers with a point, or `None` when one has a zero CPU
/// counter or working set (the whole pod is dropped then).
fn check_container_metrics(
    containers: BTreeMap<String, MetricsPoint>,
) -> Option<BTreeMap<String, MetricsPoint>> {
    let mut kept = BTreeMap::new();
    for (name, point) in containers {
        if point == MetricsPoint::default() {
            continue;
        }
        if point.cumulative_cpu_used == 0 || point.memory_usage == 0 {
            return None;
        }
        kept.insert(name, point);
    }
    (!kept.is_empty()).then_some(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="default",pod="web-1"} 2.5 1700000010000
container_cpu_usage_seconds_total{container="side",namespace="default",pod="web-1"} 0.5 1700000010000
container_cpu_usage_seconds_total{container="c",namespace="kube-system",pod="idle"} 0 1700000010000
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="app",namespace="default",pod="web-1"} 6.7108864e+07 1700000010000
container_memory_working_set_bytes{container="side",namespace="default",pod="web-1"} 1.6777216e+07 1700000010000
container_memory_working_set_bytes{container="c",namespace="kube-system",pod="idle"} 1024 1700000010000
# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container="app",namespace="default",pod="web-1"} 1.7e+09
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 11.25 1700000010000
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 6.24951296e+08 1700000010000
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
"#;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).expect("valid")
    }

    #[test]
    fn lines_parse_with_escaped_labels() {
        let s = parse_line(r#"x{a="1",b="q\"uo\\te\n"} 1.5e+03 42"#).expect("a sample");
        assert_eq!(s.name, "x");
        assert_eq!(
            s.labels,
            vec![
                ("a".to_owned(), "1".to_owned()),
                ("b".to_owned(), "q\"uo\\te\n".to_owned())
            ]
        );
        assert_eq!(s.value, 1500.0);
        assert_eq!(s.timestamp_ms, Some(42));
        let bare = parse_line("resource_scrape_error 0").expect("a sample");
        assert!(bare.labels.is_empty());
        assert_eq!(bare.timestamp_ms, None);
        assert!(parse_line("# HELP x y").is_none());
        assert!(parse_line("").is_none());
        assert!(parse_line("broken{a=1} 2").is_none());
    }

    #[test]
    fn a_kubelet_answer_becomes_a_batch() {
        let batch = decode_batch(TEXT, at(1_700_000_011), "node-0");
        let node = batch.nodes["node-0"];
        assert_eq!(node.cumulative_cpu_used, 11_250_000_000);
        assert_eq!(node.memory_usage, 624_951_296);
        assert_eq!(node.timestamp, Some(at(1_700_000_010)));
        let web = &batch.pods[&("default".to_owned(), "web-1".to_owned())];
        assert_eq!(web.len(), 2);
        assert_eq!(web["app"].cumulative_cpu_used, 2_500_000_000);
        assert_eq!(web["app"].memory_usage, 64 * 1024 * 1024);
        assert_eq!(web["app"].start_time, Some(at(1_700_000_000)));
        assert_eq!(web["side"].start_time, None);
        // A container with a zero counter drops its whole pod.
        assert!(
            !batch
                .pods
                .contains_key(&("kube-system".to_owned(), "idle".to_owned()))
        );
    }

    #[test]
    fn an_incomplete_node_point_is_dropped() {
        let batch = decode_batch(
            "node_cpu_usage_seconds_total 1 1700000010000\n",
            at(1_700_000_011),
            "node-0",
        );
        assert!(batch.nodes.is_empty());
        let untimed = decode_batch(
            "node_cpu_usage_seconds_total 1\nnode_memory_working_set_bytes 5\n",
            at(1_700_000_011),
            "node-0",
        );
        assert_eq!(untimed.nodes["node-0"].timestamp, Some(at(1_700_000_011)));
    }
}
