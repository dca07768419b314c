//! Which store the end-to-end tests' API servers keep their objects in: the embedded one (the
//! default), or the etcd cluster `MINIPLANE_TEST_ETCD_SERVERS` names (`MINIPLANE_TEST_STORE=etcd
//! ./test.sh` starts one and sets it), so that the same tests check that everything above the
//! store works the same on either backend.
//!
//! On etcd each API server (each [`super::Server`], each cluster of [`cluster`]) gets a key
//! prefix of its own (`--etcd-prefix /registry-<uuid>`), as tenants of one etcd cluster have:
//! tests running side by side never see each other's objects. Tests that are about the
//! embedded store itself (its data directory, its etcd endpoint) or that bring their own etcd
//! cluster build their clusters and servers without this.

/// The variable naming the etcd cluster's client URLs, comma-separated.
pub const ETCD_SERVERS: &str = "MINIPLANE_TEST_ETCD_SERVERS";

/// The etcd cluster's client URLs, when the tests run on etcd.
pub fn etcd_servers() -> Option<String> {
    std::env::var(ETCD_SERVERS).ok().filter(|s| !s.is_empty())
}

/// A key prefix no other server of the run uses.
fn fresh_prefix() -> String {
    format!("/registry-{}", uuid::Uuid::new_v4().simple())
}

/// The `miniplane apiserver` flags that put a server on the tests' etcd cluster (none on the
/// embedded store, or when `extra` already chooses a store).
pub fn apiserver_flags(extra: &[String]) -> Vec<String> {
    match etcd_servers() {
        Some(servers) if !extra.iter().any(|a| a.starts_with("--etcd-servers")) => vec![
            format!("--etcd-servers={servers}"),
            format!("--etcd-prefix={}", fresh_prefix()),
        ],
        _ => vec![],
    }
}

/// The storage of a [`miniplane::Cluster`] on the tests' etcd cluster, if they run on one.
pub fn etcd_storage() -> Option<apiserver::EtcdStorage> {
    etcd_servers().map(|servers| {
        let mut storage = apiserver::EtcdStorage::new(servers.split(',').map(str::to_owned));
        storage.prefix = fresh_prefix();
        storage
    })
}

/// `Cluster::builder()` on the tests' store.
pub fn cluster() -> miniplane::ClusterBuilder {
    let builder = miniplane::Cluster::builder();
    match etcd_storage() {
        Some(storage) => builder.etcd(storage),
        None => builder,
    }
}
