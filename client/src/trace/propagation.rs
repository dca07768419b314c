//! Carrying a trace from the object a handler saw to the work it queued, and through one sync.
//!
//! Two scopes, both set only by this module and both invisible to controller code:
//!
//! ```text
//!   informer listener (sync code)                  worker (async code)
//!   caused_by(ctx, || handler.on_update(..))       work = tracer.begin_work(queue, key, causes, ..)
//!        └─ queue.add(key) ─▶ take_cause(queue)    work.run(sync(key)).await
//!             = Cause { ctx, added: now }               └─ a sync_client's requests send traceparent
//!             kept with the key until get()              └─ set_summary("desired 3, have 0 → …")
//!   (thread-local: a handler never awaits)         work.finish(error)   (task-local)
//! ```
//!
//! A key added several times before a worker takes it keeps every [`Cause`] (the queue merged
//! them): the work continues the first cause's trace and links to the others.

use std::cell::RefCell;
use std::fmt::Display;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use trace::{AttributeValue, Link, Span, SpanContext, SpanKind, attr};

use super::Tracer;

/// Why a work item is queued: the span that delivered the event (or the sync that requeued
/// it), and when it was added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cause {
    /// The span to continue.
    pub context: SpanContext,
    /// When the item was added to the queue.
    pub added: SystemTime,
}

/// The event being handled on this thread right now.
struct Delivery {
    context: SpanContext,
    /// Queues that took it as a cause.
    taken_by: Vec<String>,
}

thread_local! {
    static DELIVERY: RefCell<Option<Delivery>> = const { RefCell::new(None) };
}

tokio::task_local! {
    static SCOPE: Arc<Scope>;
}

/// Runs `f` with `context` as the cause of every queue add it makes (an informer handler, or
/// a worker requeueing a key); returns `f`'s output and the names of the queues that took it.
pub fn caused_by<R>(context: SpanContext, f: impl FnOnce() -> R) -> (R, Vec<String>) {
    /// Puts the outer delivery back when the call ends, also if the handler panics.
    struct Restore(Option<Delivery>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            DELIVERY.with(|d| *d.borrow_mut() = outer);
        }
    }
    let outer = DELIVERY.with(|d| {
        d.borrow_mut().replace(Delivery {
            context,
            taken_by: Vec::new(),
        })
    });
    let _restore = Restore(outer);
    let out = f();
    let taken = DELIVERY.with(|d| {
        d.borrow_mut()
            .as_mut()
            .map(|d| std::mem::take(&mut d.taken_by))
            .unwrap_or_default()
    });
    (out, taken)
}

/// The cause of a queue add happening now, if any: the event being handled on this thread, or
/// else the sync this task runs. Called by the work queues; `queue` is recorded on the event.
pub fn take_cause(queue: &str) -> Option<Cause> {
    let delivered = DELIVERY.with(|d| {
        d.borrow_mut().as_mut().map(|d| {
            if !d.taken_by.iter().any(|q| q == queue) {
                d.taken_by.push(queue.to_owned());
            }
            d.context
        })
    });
    let context = delivered.or_else(current_context)?;
    Some(Cause {
        context,
        added: SystemTime::now(),
    })
}

/// The span of the sync this task runs, if it is traced.
pub fn current_context() -> Option<SpanContext> {
    SCOPE.try_with(|s| s.context).ok()
}

/// Sets the "what and why" line of the current sync's span (a no-op outside a traced sync).
pub fn set_summary(summary: impl Into<String>) {
    let _ = SCOPE.try_with(|s| {
        if s.context.sampled {
            s.state().summary = Some(summary.into());
        }
    });
}

/// Whether the current task runs a sync whose span is recorded: a summary or attribute that
/// costs something to build can be skipped when it is not.
pub fn recording() -> bool {
    SCOPE.try_with(|s| s.context.sampled).unwrap_or(false)
}

/// Sets an attribute of the current sync's span (a no-op outside a traced sync).
pub fn set_attribute(key: &str, value: impl Into<AttributeValue>) {
    let _ = SCOPE.try_with(|s| {
        if s.context.sampled {
            s.state().attributes.push((key.to_owned(), value.into()));
        }
    });
}

/// Records a moment of the current sync as a zero-length span `name` under it (the
/// Deployment becoming available); a no-op outside a traced sync.
pub fn mark(name: &str, summary: impl Into<String>) {
    let _ = SCOPE.try_with(|s| {
        if let Some(mut span) = s.tracer.child(&s.context, name, SpanKind::Internal) {
            span.summary = summary.into();
            span.end();
            s.tracer.record(span);
        }
    });
}

/// The task-local state of one traced sync.
pub(crate) struct Scope {
    pub(crate) tracer: Tracer,
    pub(crate) context: SpanContext,
    state: Mutex<ScopeState>,
}

#[derive(Default)]
pub(crate) struct ScopeState {
    summary: Option<String>,
    attributes: Vec<(String, AttributeValue)>,
}

impl Scope {
    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, ScopeState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Runs `fut` as a step of the trace `parent` (the scheduler's decision, say): the requests it
/// sends through a [`super::sync_client`] are child spans of `parent`. A disabled tracer runs
/// `fut` as it is.
pub async fn under<F: Future>(tracer: &Tracer, parent: SpanContext, fut: F) -> F::Output {
    if !tracer.is_enabled() {
        return fut.await;
    }
    let scope = Arc::new(Scope {
        tracer: tracer.clone(),
        context: parent,
        state: Mutex::default(),
    });
    SCOPE.scope(scope, fut).await
}

/// Runs `f` with the current scope (for [`super::sync_client`]'s requests).
pub(crate) fn with_scope<R>(f: impl FnOnce(&Arc<Scope>) -> R) -> Option<R> {
    SCOPE.try_with(f).ok()
}

/// The handling of one work item: the span of the sync, open until [`Work::finish`].
pub struct Work {
    scope: Option<Arc<Scope>>,
    span: Option<Span>,
}

impl Tracer {
    /// Starts handling `key`, taken from `queue` with `causes` after `retries` failed syncs;
    /// `object` is the trace context on the key's object (the write that last changed what it
    /// should be). Opens the span `name` of the sync:
    ///
    /// * under the first cause in the object's trace (or the first cause, if the object has
    ///   no trace), after a "queue wait" span under that cause;
    /// * else under the object's own trace: a key woken only by events of other traces (a
    ///   late report from an earlier rollout) still works for the object's latest intent;
    /// * else (nothing traced) as a new trace.
    ///
    /// The other causes are links. A continued context that is not sampled is carried on as
    /// the sync's scope, with no span.
    pub fn begin_work(
        &self,
        queue: &str,
        key: &dyn Display,
        causes: &[Cause],
        retries: u32,
        name: &str,
        object: Option<SpanContext>,
    ) -> Work {
        if !self.is_enabled() {
            return Work {
                scope: None,
                span: None,
            };
        }
        let first = match object {
            Some(o) => causes.iter().find(|c| c.context.trace_id == o.trace_id),
            None => causes.first(),
        };
        let continued = first.map(|c| c.context).or(object);
        if let Some(context) = continued.filter(|c| !c.sampled) {
            // Carried on, not recorded (see the module docs of `trace`).
            return Work {
                scope: Some(Arc::new(Scope {
                    tracer: self.clone(),
                    context,
                    state: Mutex::new(ScopeState::default()),
                })),
                span: None,
            };
        }
        let now = SystemTime::now();
        let links: Vec<Link> = causes
            .iter()
            .filter(|c| Some(*c) != first)
            .map(|c| c.context.into())
            .collect();
        let key = key.to_string();
        let sync = match (first, object) {
            (Some(first), _) => {
                self.record_wait(first, &links, queue, &key, causes.len(), retries, now);
                self.child(&first.context, name, SpanKind::Internal)
            }
            (None, Some(object)) => self.child(&object, name, SpanKind::Internal),
            (None, None) => self.root(name, SpanKind::Internal),
        };
        let Some(mut span) = sync else {
            return Work {
                scope: None,
                span: None,
            };
        };
        span.links = links;
        span.set("queue", queue).set(attr::KEY, key.as_str());
        if retries > 0 {
            span.set(attr::RETRIES, retries);
        }
        Work {
            scope: Some(Arc::new(Scope {
                tracer: self.clone(),
                context: span.context(),
                state: Mutex::new(ScopeState::default()),
            })),
            span: Some(span),
        }
    }

    /// The "queue wait" span of a key, under the cause it continues: from that cause's add
    /// (so never before it) until `now`.
    #[allow(clippy::too_many_arguments)]
    fn record_wait(
        &self,
        first: &Cause,
        links: &[Link],
        queue: &str,
        key: &str,
        causes: usize,
        retries: u32,
        now: SystemTime,
    ) {
        let Some(wait) = self.child(&first.context, "queue wait", SpanKind::Internal) else {
            return;
        };
        let mut wait = wait
            .started_at(first.added)
            .with("queue", queue)
            .with(attr::KEY, key)
            .with(attr::RETRIES, retries)
            .with("causes", causes);
        wait.end_at(now);
        let merged = match causes {
            1 => String::new(),
            n => format!(", {n} events merged"),
        };
        let retried = match retries {
            0 => String::new(),
            n => format!(", retry {n}"),
        };
        wait.summary = format!(
            "{key} waited {} in the {queue} queue{merged}{retried}",
            trace::render::format_duration(wait.end_unix_nanos - wait.start_unix_nanos)
        );
        wait.links = links.to_vec();
        self.record(wait);
    }
}

impl Work {
    /// The sync's span context (`None` when not traced).
    pub fn context(&self) -> Option<SpanContext> {
        self.scope.as_ref().map(|s| s.context)
    }

    /// Runs the sync inside this work's scope, so its writes carry the trace.
    pub async fn run<F: Future>(&self, f: F) -> F::Output {
        match &self.scope {
            Some(scope) => SCOPE.scope(scope.clone(), f).await,
            None => f.await,
        }
    }

    /// Runs `f` (a requeue) with this sync as the cause of the queue adds it makes.
    pub fn requeue<R>(&self, f: impl FnOnce() -> R) -> R {
        match self.context() {
            Some(ctx) => caused_by(ctx, f).0,
            None => f(),
        }
    }

    /// Ends the sync's span (with `error` if it failed) and records it.
    pub fn finish(self, error: Option<&dyn Display>) {
        let (Some(scope), Some(mut span)) = (self.scope, self.span) else {
            return;
        };
        let (summary, attributes) = {
            let mut state = scope.state();
            (state.summary.take(), std::mem::take(&mut state.attributes))
        };
        for (k, v) in attributes {
            span.attributes.insert(k, v);
        }
        let key = span.attribute(attr::KEY).unwrap_or_default();
        span.summary = summary.unwrap_or_else(|| format!("synced {key}"));
        if let Some(e) = error {
            span.set(attr::ERROR, e.to_string());
            span.summary.push_str(&format!("; failed: {e}"));
        }
        span.end();
        scope.tracer.record(span);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An enabled tracer whose exporter is drained by hand (it posts nowhere).
    fn test_tracer() -> (Tracer, super::super::Exporter) {
        Tracer::new(
            "test",
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap()))
                .unwrap(),
            16,
        )
    }

    #[test]
    fn a_handler_hands_its_cause_to_the_queues_it_adds_to() {
        let ctx = SpanContext::new_root();
        assert_eq!(take_cause("q"), None, "no event, no cause");
        let (cause, taken) = caused_by(ctx, || {
            let c = take_cause("deployment");
            let _ = take_cause("deployment");
            let _ = take_cause("replicaset");
            c
        });
        assert_eq!(cause.map(|c| c.context), Some(ctx));
        assert_eq!(taken, ["deployment", "replicaset"]);
        assert_eq!(take_cause("q"), None, "the cause ends with the handler");
    }

    #[test]
    fn nested_causes_restore_the_outer_one() {
        let outer = SpanContext::new_root();
        let inner = SpanContext::new_root();
        let ((), taken) = caused_by(outer, || {
            let (c, _) = caused_by(inner, || take_cause("a"));
            assert_eq!(c.map(|c| c.context), Some(inner));
            assert_eq!(take_cause("b").map(|c| c.context), Some(outer));
        });
        assert_eq!(taken, ["b"]);
    }

    #[tokio::test]
    async fn a_sync_scope_names_its_span_and_carries_summary_and_attributes() {
        let (tracer, mut exporter) = test_tracer();
        let first = Cause {
            context: SpanContext::new_root(),
            added: SystemTime::now(),
        };
        let second = Cause {
            context: SpanContext::new_root(),
            added: SystemTime::now(),
        };
        let work = tracer.begin_work(
            "replicaset",
            &"default/web",
            &[first, second],
            1,
            "sync",
            None,
        );
        let seen = work
            .run(async {
                set_summary("desired 3, have 0 → create 3");
                set_attribute("creates", 3u32);
                (current_context(), take_cause("replicaset"))
            })
            .await;
        assert_eq!(seen.0, work.context());
        assert_eq!(
            seen.1.map(|c| c.context),
            work.context(),
            "a requeue in a sync"
        );
        assert_eq!(current_context(), None, "the scope ends with the sync");
        work.finish(None);
        let spans = exporter.try_drain();
        assert_eq!(spans.len(), 2);
        let (wait, sync) = (&spans[0], &spans[1]);
        assert_eq!(wait.name, "queue wait");
        assert_eq!(wait.parent_span_id, Some(first.context.span_id));
        assert!(
            wait.summary.contains("2 events merged, retry 1"),
            "{}",
            wait.summary
        );
        assert_eq!(sync.trace_id, first.context.trace_id);
        assert_eq!(sync.parent_span_id, Some(first.context.span_id));
        assert_eq!(sync.links, vec![Link::from(second.context)]);
        assert_eq!(sync.summary, "desired 3, have 0 → create 3");
        assert_eq!(sync.attribute("creates").as_deref(), Some("3"));
    }

    #[tokio::test]
    async fn a_sync_continues_its_objects_trace_over_causes_from_other_traces() {
        let (tracer, mut exporter) = test_tracer();
        let object = SpanContext::new_root();
        let stale = Cause {
            context: SpanContext::new_root(),
            added: SystemTime::now(),
        };
        let current = Cause {
            context: object.child(),
            added: SystemTime::now(),
        };
        // A cause in the object's trace is the parent, even when it came second.
        let work = tracer.begin_work("d", &"k", &[stale, current], 0, "sync", Some(object));
        assert_eq!(work.context().map(|c| c.trace_id), Some(object.trace_id));
        work.finish(None);
        let spans = exporter.try_drain();
        assert_eq!(spans[1].parent_span_id, Some(current.context.span_id));
        assert_eq!(spans[1].links, vec![Link::from(stale.context)]);
        // Only stale causes: the sync continues the object's trace, linked to them.
        let work = tracer.begin_work("d", &"k", &[stale], 0, "sync", Some(object));
        work.finish(None);
        let spans = exporter.try_drain();
        assert_eq!(spans.len(), 1, "no queue wait under another trace");
        assert_eq!(spans[0].parent_span_id, Some(object.span_id));
        assert_eq!(spans[0].links, vec![Link::from(stale.context)]);
    }

    #[test]
    fn a_disabled_tracer_opens_no_scope() {
        let work = Tracer::disabled().begin_work("q", &"k", &[], 0, "sync", None);
        assert_eq!(work.context(), None);
        work.finish(None);
    }

    #[tokio::test]
    async fn an_unsampled_cause_is_carried_through_the_sync_without_spans() {
        let (tracer, mut exporter) = test_tracer();
        let unsampled = SpanContext {
            sampled: false,
            ..SpanContext::new_root()
        };
        assert!(tracer.child(&unsampled, "x", SpanKind::Internal).is_none());
        let cause = Cause {
            context: unsampled,
            added: SystemTime::now(),
        };
        let sampled_object = SpanContext::new_root();
        for object in [None, Some(unsampled)] {
            let work = tracer.begin_work("q", &"k", &[cause], 0, "sync", object);
            assert_eq!(work.context(), Some(unsampled));
            let seen = work
                .run(async {
                    set_summary("not kept");
                    set_attribute("n", 1u32);
                    (
                        recording(),
                        current_context(),
                        take_cause("q").map(|c| c.context),
                    )
                })
                .await;
            assert_eq!(
                seen,
                (false, Some(unsampled), Some(unsampled)),
                "not recording; the scope and a requeue carry the unsampled context"
            );
            work.finish(None);
        }
        // An object with no trace of the cause's: the object's own (sampled) trace is
        // continued and recorded.
        let work = tracer.begin_work("q", &"k", &[cause], 0, "sync", Some(sampled_object));
        assert_eq!(
            work.context().map(|c| c.trace_id),
            Some(sampled_object.trace_id)
        );
        assert!(work.run(async { recording() }).await);
        work.finish(None);
        let spans = exporter.try_drain();
        assert_eq!(spans.len(), 1, "only the sampled sync: {spans:?}");
        assert_eq!(spans[0].trace_id, sampled_object.trace_id);
    }
}
