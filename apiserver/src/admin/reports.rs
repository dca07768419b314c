//! What components and the lab runner report to the API server, kept in memory: each
//! component's controller work queues (`PUT /miniplane/v1/components/{c}/controllers`) and the
//! lab status (`PUT /miniplane/v1/lab`). Lost on restart; reporters send again within a
//! second. No Kubernetes counterpart (kube-controller-manager shows its queues only as
//! Prometheus metrics on its own port).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use admin::{ControllerStatus, LabStatus};

/// Components that may report at once (a bound on memory, whatever clients send).
pub const MAX_COMPONENTS: usize = 32;

/// The last reports (cheap to clone; clones share them).
#[derive(Clone, Default)]
pub struct Reports {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    /// component → its controllers, as last reported.
    controllers: BTreeMap<String, Vec<ControllerStatus>>,
    lab: Option<LabStatus>,
}

impl Reports {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces `component`'s controllers, stamping each with `now` and the component.
    /// `false` (nothing kept) when [`MAX_COMPONENTS`] others have reported already.
    pub fn set_controllers(
        &self,
        component: &str,
        mut items: Vec<ControllerStatus>,
        now: &str,
    ) -> bool {
        for item in &mut items {
            item.component = component.to_string();
            item.reported_at = Some(now.to_string());
        }
        let mut inner = self.lock();
        if !inner.controllers.contains_key(component) && inner.controllers.len() >= MAX_COMPONENTS {
            return false;
        }
        inner.controllers.insert(component.to_string(), items);
        true
    }

    /// Every reported controller, sorted by name.
    pub fn controllers(&self) -> Vec<ControllerStatus> {
        let mut all: Vec<ControllerStatus> = self
            .lock()
            .controllers
            .values()
            .flatten()
            .cloned()
            .collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// Sets the lab status.
    pub fn set_lab(&self, lab: LabStatus) {
        self.lock().lab = Some(lab);
    }

    /// The lab status, if a lab reported.
    pub fn lab(&self) -> Option<LabStatus> {
        self.lock().lab.clone()
    }
}
