//! Completion indexes of Indexed Jobs: the interval strings of `status.completedIndexes` and
//! `status.failedIndexes`, the index a pod carries, and which indexes still need a pod.
//!
//! Mirrors `pkg/controller/job/indexed_job_utils.go` (`orderedIntervals`, `parseIndexesFromString`,
//! `getCompletionIndex`, `firstPendingIndexes`, `appendDuplicatedIndexPodsForRemoval`,
//! `podGenerateNameWithIndex`).
//!
//! ```text
//!   {0, 1, 2, 5, 7, 8}  ◀──▶  "0-2,5,7,8"     (a run of 3 or more is written as a range)
//! ```

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;

use super::JOB_COMPLETION_INDEX_ANNOTATION;

/// A set of completion indexes, kept ordered.
pub type Indexes = BTreeSet<i32>;

/// `parseIndexesFromString`: the indexes below `completions` named by `"1,3-5"`; malformed
/// parts are skipped, as Kubernetes logs and skips them.
pub fn parse_indexes(text: &str, completions: i32) -> Indexes {
    let mut out = Indexes::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<i32>(), b.parse::<i32>()),
            None => (part.parse::<i32>(), part.parse::<i32>()),
        };
        let (Ok(first), Ok(last)) = (first, last) else {
            continue;
        };
        for ix in first.max(0)..=last.min(completions - 1) {
            out.insert(ix);
        }
    }
    out
}

/// `orderedIntervals.String`: `"0-2,5,7,8"`. Runs of two are written as two numbers, runs of
/// three or more as a range, as Kubernetes writes them.
pub fn format_indexes(indexes: &Indexes) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut iter = indexes.iter().copied().peekable();
    while let Some(first) = iter.next() {
        let mut last = first;
        while iter.peek() == Some(&(last + 1)) {
            last += 1;
            iter.next();
        }
        match last - first {
            0 => parts.push(first.to_string()),
            1 => {
                parts.push(first.to_string());
                parts.push(last.to_string());
            }
            _ => parts.push(format!("{first}-{last}")),
        }
    }
    parts.join(",")
}

/// `getCompletionIndex`: the pod's index from its annotation, `None` when absent or not a
/// non-negative number.
pub fn completion_index(pod: &Pod) -> Option<i32> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(JOB_COMPLETION_INDEX_ANNOTATION)?
        .parse::<i32>()
        .ok()
        .filter(|ix| *ix >= 0)
}

/// The pod's index when it is valid for a Job of `completions`.
pub fn valid_index(pod: &Pod, completions: i32) -> Option<i32> {
    completion_index(pod).filter(|ix| *ix < completions)
}

/// `firstPendingIndexes`: the `count` lowest indexes below `completions` that are in none of
/// `non_pending` (succeeded, active, failed, and terminating when only failed pods are
/// replaced).
pub fn first_pending_indexes(non_pending: &Indexes, count: usize, completions: i32) -> Vec<i32> {
    (0..completions)
        .filter(|ix| !non_pending.contains(ix))
        .take(count)
        .collect()
}

/// `appendDuplicatedIndexPodsForRemoval`: the active pods to remove because their index is
/// missing, out of range or held by another pod too (of several pods with one index, the one
/// ranked last by `rank` stays). Returns `(remove, keep)`.
pub fn duplicated_index_pods<'a>(
    pods: &[&'a Pod],
    completions: i32,
    rank: impl Fn(&mut Vec<&'a Pod>),
) -> (Vec<&'a Pod>, Vec<&'a Pod>) {
    let mut remove = Vec::new();
    let mut by_index: BTreeMap<i32, Vec<&'a Pod>> = BTreeMap::new();
    for pod in pods {
        match valid_index(pod, completions) {
            Some(ix) => by_index.entry(ix).or_default().push(pod),
            None => remove.push(*pod),
        }
    }
    let mut keep = Vec::new();
    for (_, mut same) in by_index {
        if same.len() > 1 {
            rank(&mut same);
        }
        if let Some(last) = same.pop() {
            keep.push(last);
        }
        remove.extend(same);
    }
    (remove, keep)
}

/// `maxGeneratedNameLength`: a generated name's prefix leaves room for 5 random characters in
/// a 63-character label value.
const MAX_GENERATED_NAME_LENGTH: usize = 63 - 5;

/// `podGenerateNameWithIndex`: `<job>-<index>-`, the Job's name cut so the whole fits.
pub fn pod_generate_name_with_index(job_name: &str, index: i32) -> String {
    let append_length = index.to_string().len() + 2;
    let mut name = job_name;
    if name.len() + append_length > MAX_GENERATED_NAME_LENGTH {
        let keep = MAX_GENERATED_NAME_LENGTH.saturating_sub(append_length);
        name = name.get(..keep).unwrap_or(name);
    }
    format!("{name}-{index}-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_round_trip_as_kubernetes_writes_them() {
        let set: Indexes = [0, 1, 2, 5, 7, 8, 10, 11, 12, 13].into_iter().collect();
        assert_eq!(format_indexes(&set), "0-2,5,7,8,10-13");
        assert_eq!(parse_indexes("0-2,5,7,8,10-13", 100), set);
        assert_eq!(format_indexes(&Indexes::new()), "");
        // Out of range and malformed parts are dropped.
        assert_eq!(
            parse_indexes("1,x,3-9", 5),
            [1, 3, 4].into_iter().collect::<Indexes>()
        );
    }

    #[test]
    fn first_pending_skips_the_non_pending() {
        let non_pending: Indexes = [0, 2, 3].into_iter().collect();
        assert_eq!(first_pending_indexes(&non_pending, 3, 10), vec![1, 4, 5]);
        assert_eq!(first_pending_indexes(&non_pending, 5, 5), vec![1, 4]);
    }

    #[test]
    fn long_job_names_are_cut_for_the_index() {
        assert_eq!(pod_generate_name_with_index("pi", 3), "pi-3-");
        let long = "a".repeat(70);
        let name = pod_generate_name_with_index(&long, 12);
        assert_eq!(name.len(), 58);
        assert!(name.ends_with("-12-"));
    }
}
