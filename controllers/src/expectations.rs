//! Expectations: what a controller is waiting to see in its informer after its own writes.
//!
//! Mirrors `ControllerExpectations` and `UIDTrackingControllerExpectations` in
//! `pkg/controller/controller_utils.go`.
//!
//! The informer cache lags behind the API server. A ReplicaSet controller that just created
//! 3 pods will, on its next sync, still see the old pod count — and create 3 more. So before
//! writing it records "expect 3 creations"; each pod ADDED event lowers that count; the
//! ReplicaSet is only managed again once the count reaches 0 (or 5 minutes pass, in case an
//! event was lost).
//!
//! ```text
//!   manage_replicas: expect_creations(rs, 3) ──▶ POST pod ×3
//!   informer ADDED ×3: creation_observed(rs) ×3    add: 3 → 0
//!   next sync: satisfied_expectations(rs) = true ──▶ manage again
//! ```
//!
//! Deletions are tracked by pod key, so a pod seen first with a `deletionTimestamp` and later
//! as DELETED is counted once.

use std::collections::{BTreeMap, BTreeSet};

use apimachinery::ObjectKey;
use jiff::{SignedDuration, Timestamp};

/// `ExpectationsTimeout`: expectations older than this are considered satisfied.
pub const EXPECTATIONS_TIMEOUT: SignedDuration = SignedDuration::from_secs(5 * 60);

/// `ControlleeExpectations`: outstanding creations and deletions of one controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlleeExpectations {
    /// Creations still expected.
    pub add: i64,
    /// Deletions still expected.
    pub del: i64,
    /// When the expectations were set (for the TTL).
    pub timestamp: Timestamp,
}

impl ControlleeExpectations {
    /// `Fulfilled`: nothing more is expected.
    pub fn fulfilled(&self) -> bool {
        self.add <= 0 && self.del <= 0
    }

    /// `isExpired`: set more than [`EXPECTATIONS_TIMEOUT`] before `now`.
    pub fn is_expired(&self, now: Timestamp) -> bool {
        now.duration_since(self.timestamp) > EXPECTATIONS_TIMEOUT
    }
}

/// `UIDTrackingControllerExpectations`: per controller key, counts of expected creations
/// and deletions plus the keys of the pods expected to be deleted. Owned by the controller
/// (one per ReplicaSet controller), updated by its informer handlers and syncs.
#[derive(Debug, Clone, Default)]
pub struct Expectations {
    /// Controller key → counts.
    records: BTreeMap<ObjectKey, ControlleeExpectations>,
    /// Controller key → pods whose deletion is expected.
    uids: BTreeMap<ObjectKey, BTreeSet<ObjectKey>>,
}

impl Expectations {
    /// No expectations.
    pub fn new() -> Self {
        Self::default()
    }

    /// `GetExpectations`.
    pub fn get_expectations(&self, controller: &ObjectKey) -> Option<ControlleeExpectations> {
        self.records.get(controller).copied()
    }

    /// `SatisfiedExpectations`: true when there is no record (a new controller, or one that
    /// expects nothing), when everything expected was observed, or when the record expired.
    pub fn satisfied_expectations(&self, controller: &ObjectKey, now: Timestamp) -> bool {
        match self.records.get(controller) {
            Some(exp) => exp.fulfilled() || exp.is_expired(now),
            None => true,
        }
    }

    /// `SetExpectations`: replaces the record, stamped `now`.
    pub fn set_expectations(&mut self, controller: &ObjectKey, add: i64, del: i64, now: Timestamp) {
        self.records.insert(
            controller.clone(),
            ControlleeExpectations {
                add,
                del,
                timestamp: now,
            },
        );
    }

    /// `ExpectCreations`.
    pub fn expect_creations(&mut self, controller: &ObjectKey, adds: usize, now: Timestamp) {
        self.set_expectations(controller, adds as i64, 0, now);
    }

    /// `ExpectDeletions` (UID tracking): expect these pods to go.
    pub fn expect_deletions(&mut self, controller: &ObjectKey, pods: &[ObjectKey], now: Timestamp) {
        let keys: BTreeSet<ObjectKey> = pods.iter().cloned().collect();
        let count = keys.len() as i64;
        self.uids.insert(controller.clone(), keys);
        self.set_expectations(controller, 0, count, now);
    }

    /// `LowerExpectations`: the timestamp is kept.
    pub fn lower_expectations(&mut self, controller: &ObjectKey, add: i64, del: i64) {
        if let Some(exp) = self.records.get_mut(controller) {
            exp.add -= add;
            exp.del -= del;
        }
    }

    /// `RaiseExpectations`.
    pub fn raise_expectations(&mut self, controller: &ObjectKey, add: i64, del: i64) {
        self.lower_expectations(controller, -add, -del);
    }

    /// `CreationObserved`: a pod ADDED event (or a creation that was never attempted).
    pub fn creation_observed(&mut self, controller: &ObjectKey) {
        self.lower_expectations(controller, 1, 0);
    }

    /// `DeletionObserved` (UID tracking): counts `pod` only if its deletion was expected and
    /// not yet counted.
    pub fn deletion_observed(&mut self, controller: &ObjectKey, pod: &ObjectKey) {
        let removed = self
            .uids
            .get_mut(controller)
            .is_some_and(|keys| keys.remove(pod));
        if removed {
            self.lower_expectations(controller, 0, 1);
        }
    }

    /// `GetUIDs`: pods whose deletion is still expected.
    pub fn get_uids(&self, controller: &ObjectKey) -> Option<&BTreeSet<ObjectKey>> {
        self.uids.get(controller)
    }

    /// `DeleteExpectations`: the controller is gone.
    pub fn delete_expectations(&mut self, controller: &ObjectKey) {
        self.records.remove(controller);
        self.uids.remove(controller);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new(Some("default"), name)
    }

    use crate::testing::at;

    #[test]
    fn creations_are_satisfied_once_all_are_observed() {
        let mut e = Expectations::new();
        let rs = key("rs");
        assert!(e.satisfied_expectations(&rs, at(0)), "no record: sync");
        e.expect_creations(&rs, 3, at(0));
        assert!(!e.satisfied_expectations(&rs, at(1)));
        e.creation_observed(&rs);
        e.creation_observed(&rs);
        assert!(!e.satisfied_expectations(&rs, at(1)));
        e.creation_observed(&rs);
        assert!(e.satisfied_expectations(&rs, at(1)));
        assert!(e.satisfied_expectations(&key("other"), at(1)));
    }

    #[test]
    fn expectations_expire_after_five_minutes() {
        let mut e = Expectations::new();
        let rs = key("rs");
        e.expect_creations(&rs, 2, at(0));
        assert!(
            !e.satisfied_expectations(&rs, at(300)),
            "exactly 5 minutes is not past the TTL"
        );
        assert!(e.satisfied_expectations(&rs, at(301)));
        // Lowering does not refresh the timestamp; setting does.
        e.creation_observed(&rs);
        assert!(e.satisfied_expectations(&rs, at(301)));
        e.expect_creations(&rs, 2, at(301));
        assert!(!e.satisfied_expectations(&rs, at(400)));
    }

    #[test]
    fn deletions_are_counted_once_per_pod() {
        let mut e = Expectations::new();
        let rs = key("rs");
        e.expect_deletions(&rs, &[key("p1"), key("p2")], at(0));
        e.deletion_observed(&rs, &key("p1")); // deletionTimestamp update
        e.deletion_observed(&rs, &key("p1")); // then the DELETED event: not counted again
        e.deletion_observed(&rs, &key("unrelated"));
        assert_eq!(e.get_expectations(&rs).map(|x| x.del), Some(1));
        assert!(!e.satisfied_expectations(&rs, at(1)));
        e.deletion_observed(&rs, &key("p2"));
        assert!(e.satisfied_expectations(&rs, at(1)));
        assert_eq!(e.get_uids(&rs).map(BTreeSet::len), Some(0));
        e.delete_expectations(&rs);
        assert!(e.get_expectations(&rs).is_none() && e.get_uids(&rs).is_none());
    }
}
