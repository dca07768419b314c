//! Where `componentstatuses` finds the components it probes: kube-apiserver's fixed list
//! (`pkg/registry/core/componentstatus`'s `validator.go`), which whoever starts the components
//! may change once they are bound. A tunable of the server ([`crate::ServerOptions`]); the
//! probing itself is `handlers::component_status`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

/// Where the components serve `/healthz`, by their name in the list; shared, so the caller
/// that starts the components can say where they listen once they are bound.
#[derive(Debug, Clone)]
pub struct ComponentProbes(Arc<RwLock<BTreeMap<String, SocketAddr>>>);

impl Default for ComponentProbes {
    /// kube-apiserver's list: the scheduler on 127.0.0.1:10259, the controller-manager on
    /// 127.0.0.1:10257.
    fn default() -> Self {
        let probes = ComponentProbes(Arc::default());
        probes.set("scheduler", SocketAddr::from(([127, 0, 0, 1], 10259)));
        probes.set(
            "controller-manager",
            SocketAddr::from(([127, 0, 0, 1], 10257)),
        );
        probes
    }
}

impl ComponentProbes {
    /// Probes `name` at `http://<addr>/healthz` from now on.
    pub fn set(&self, name: &str, addr: SocketAddr) {
        self.0
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_owned(), addr);
    }

    /// The components and their addresses, by name.
    pub fn snapshot(&self) -> BTreeMap<String, SocketAddr> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
