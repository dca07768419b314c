//! [`LabStatus`]: what `/miniplane/v1/lab` shows of the teaching lab running on a cluster
//! (published by `miniplane lab start/check`). Killercoda's step checks are the model.

use serde::{Deserialize, Serialize};

/// The result of one check of a lab step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckResult {
    /// The step (1-based).
    pub step: usize,
    /// The check's name, unique in its step.
    pub name: String,
    /// What it asserts, in words.
    pub description: String,
    /// Whether it holds.
    pub passed: bool,
    /// For a failing check: what is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A lab's progress on a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabStatus {
    /// The lab's directory name (`03-workqueue`).
    pub lab: String,
    /// Its title.
    pub title: String,
    /// The current step (1-based): the first one whose checks do not all pass.
    pub step: usize,
    /// Number of steps.
    pub steps: usize,
    /// The current step's title.
    pub step_title: String,
    /// The checks of every step up to the current one.
    pub checks: Vec<CheckResult>,
    /// Every step passed.
    pub done: bool,
    /// When it was checked (RFC 3339).
    pub checked_at: String,
}
