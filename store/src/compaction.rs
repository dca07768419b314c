//! Automatic compaction (etcd's `server/etcdserver/api/v3compactor/`: `revision.go` keeps the
//! last N revisions, `periodic.go` keeps a time window by sampling the revision as time passes).
//!
//! The decision is a plain function of samples, so it is tested with made-up instants:
//!
//! ```text
//!   tick(now, current, compacted)
//!     samples += (now, current)
//!     by revisions: target_n = current - N
//!     by duration:  target_t = the newest sample taken at least T ago
//!     target = min of the set rules;  compact to it if it is above `compacted`
//! ```
//!
//! The background task (`run`) only calls `tick` on an interval and sends the compaction to the
//! committer; the explicit [`crate::Backend::compact`] is the same request.

use crate::Revision;
use crate::config::AutoCompaction;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The sans-IO auto-compaction policy.
#[derive(Debug)]
pub struct AutoCompactor {
    config: AutoCompaction,
    /// (when, current revision then), oldest first; trimmed to one sample older than the window.
    samples: VecDeque<(Instant, Revision)>,
}

impl AutoCompactor {
    /// A policy with no samples yet.
    pub fn new(config: AutoCompaction) -> Self {
        AutoCompactor {
            config,
            samples: VecDeque::new(),
        }
    }

    /// Records the current revision at `now` and returns the revision to compact to, if any.
    pub fn tick(
        &mut self,
        now: Instant,
        current: Revision,
        compacted: Revision,
    ) -> Option<Revision> {
        self.samples.push_back((now, current));
        let mut target: Option<Revision> = None;
        if let Some(n) = self.config.retain_revisions {
            target = Some(Revision(current.0.saturating_sub(n)));
        }
        if let Some(window) = self.config.retain_duration {
            let old_enough = |at: &Instant| now.saturating_duration_since(*at) >= window;
            // Keep only the newest sample that is old enough, and everything after it.
            while self.samples.len() > 1
                && self.samples.get(1).is_some_and(|(at, _)| old_enough(at))
            {
                self.samples.pop_front();
            }
            let by_time = match self.samples.front() {
                Some((at, rev)) if old_enough(at) => *rev,
                _ => Revision::ZERO,
            };
            target = Some(target.map_or(by_time, |t| t.min(by_time)));
        } else {
            // Without a time rule only the latest sample matters.
            while self.samples.len() > 1 {
                self.samples.pop_front();
            }
        }
        target.filter(|t| *t > compacted && *t > Revision::ZERO)
    }

    /// How often the task should tick.
    pub fn interval(&self) -> Duration {
        if self.config.interval.is_zero() {
            Duration::from_secs(1)
        } else {
            self.config.interval
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_last_n_revisions() {
        let mut c = AutoCompactor::new(AutoCompaction {
            retain_revisions: Some(10),
            ..AutoCompaction::default()
        });
        let t = Instant::now();
        assert_eq!(c.tick(t, Revision(5), Revision::ZERO), None);
        assert_eq!(c.tick(t, Revision(25), Revision::ZERO), Some(Revision(15)));
        assert_eq!(c.tick(t, Revision(25), Revision(15)), None);
    }

    #[test]
    fn keeps_a_time_window() {
        let mut c = AutoCompactor::new(AutoCompaction {
            retain_duration: Some(Duration::from_secs(60)),
            ..AutoCompaction::default()
        });
        let t0 = Instant::now();
        let s = Duration::from_secs;
        assert_eq!(c.tick(t0, Revision(10), Revision::ZERO), None);
        assert_eq!(c.tick(t0 + s(30), Revision(20), Revision::ZERO), None);
        assert_eq!(
            c.tick(t0 + s(60), Revision(30), Revision::ZERO),
            Some(Revision(10))
        );
        assert_eq!(
            c.tick(t0 + s(95), Revision(40), Revision(10)),
            Some(Revision(20))
        );
        assert!(c.samples.len() <= 3);
    }

    #[test]
    fn both_rules_keep_the_longer_history() {
        let mut c = AutoCompactor::new(AutoCompaction {
            retain_revisions: Some(5),
            retain_duration: Some(Duration::from_secs(60)),
            ..AutoCompaction::default()
        });
        let t0 = Instant::now();
        assert_eq!(c.tick(t0, Revision(10), Revision::ZERO), None);
        let later = t0 + Duration::from_secs(61);
        assert_eq!(
            c.tick(later, Revision(100), Revision::ZERO),
            Some(Revision(10))
        );
    }
}
