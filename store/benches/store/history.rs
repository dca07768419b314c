//! The "history of one object" row: `Backend::key_history` (what `miniplane history` reads) of
//! a key written [`VERSIONS`] times among [`NEIGHBOURS`] other keys written as often, on the
//! store in process and on an etcd member through `store::EtcdBackend` (a read at the
//! compaction point, then a watch of the key replaying its changes). Values are 2 KiB, about a
//! Deployment's JSON. Median of [`READS`] reads; the writes that fill the store are not timed.

use crate::{etcd, median_dur, ms};
use bytes::Bytes;
use std::path::Path;
use std::time::{Duration, Instant};
use store::{Backend, EtcdBackend, EtcdConfig, Store, StoreConfig};

/// Versions of the object whose history is read.
const VERSIONS: usize = 1_000;
/// Other keys, each written once per version of the object.
const NEIGHBOURS: usize = 10;
/// Timed reads.
const READS: usize = 21;
/// The object's key (kube-apiserver's layout, inside etcd's default prefix).
const KEY: &str = "/registry/configmaps/default/object";

async fn fill(db: &dyn Backend) {
    for i in 0..VERSIONS {
        let value = Bytes::from(format!("{i:>2048}"));
        db.put(Bytes::from_static(KEY.as_bytes()), value.clone())
            .await
            .unwrap();
        for n in 0..NEIGHBOURS {
            db.put(
                Bytes::from(format!("/registry/configmaps/default/neighbour-{n}")),
                value.clone(),
            )
            .await
            .unwrap();
        }
    }
}

async fn time_reads(db: &dyn Backend) -> Duration {
    let mut times = Vec::new();
    for _ in 0..READS {
        let start = Instant::now();
        let history = db.key_history(KEY.as_bytes()).await.unwrap();
        times.push(start.elapsed());
        assert_eq!(history.changes.len(), VERSIONS);
    }
    median_dur(times)
}

/// Prints the row (the store in process; etcd when its binary is there).
pub async fn bench_history(root: &Path, etcd_binary: Option<&Path>) {
    let dir = tempfile::tempdir_in(root).unwrap();
    let mut config = StoreConfig::new(dir.path());
    // Filling is not what is measured: acknowledged before the disk, the history is the same.
    config.fsync = false;
    let store = Store::open(config).await.unwrap();
    fill(&store).await;
    let on_store = time_reads(&store).await;
    store.close().await.unwrap();
    let on_etcd = match etcd_binary {
        Some(binary) => {
            let member = etcd::Etcd::start(binary, root).await;
            let db = EtcdBackend::connect(EtcdConfig::new([member.endpoint().to_owned()]))
                .await
                .unwrap();
            fill(&db).await;
            let t = time_reads(&db).await;
            db.close().await;
            ms(t)
        }
        None => "—".to_owned(),
    };
    println!(
        "| history of a key with {VERSIONS} versions among {} writes, median latency | {} | — | {on_etcd} |",
        VERSIONS * (NEIGHBOURS + 1),
        ms(on_store)
    );
}
