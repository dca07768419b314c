//! The snapshot rows: a store of [`PODS`] pod-sized objects ([`VALUE`] bytes each, about a
//! Pod's JSON with its managedFields) saved with `Snapshot::read` + `encode` (what `GET
//! /miniplane/v1/snapshot` does) and restored with `Snapshot::decode` + `restore` into a new
//! data directory (what `miniplane up --restore` does). Medians of [`RUNS`] runs; the restore
//! syncs what it writes.

use crate::{median_dur, ms};
use bytes::Bytes;
use std::path::Path;
use std::time::Instant;
use store::{Backend, Snapshot, Store, StoreConfig};

/// Objects in the store.
const PODS: usize = 10_000;
/// Bytes per object.
const VALUE: usize = 3 * 1024;
/// Runs per figure.
const RUNS: usize = 5;

/// Prints the row.
pub async fn bench_snapshot(root: &Path) {
    let dir = tempfile::tempdir_in(root).unwrap();
    let mut config = StoreConfig::new(dir.path().join("store"));
    config.fsync = false;
    let store = Store::open(config).await.unwrap();
    for i in 0..PODS {
        store
            .put(
                Bytes::from(format!("/registry/pods/default/pod-{i:05}")),
                Bytes::from(format!("{i:>VALUE$}")),
            )
            .await
            .unwrap();
    }
    let (mut saves, mut restores) = (Vec::new(), Vec::new());
    let mut size = 0;
    for run in 0..RUNS {
        let start = Instant::now();
        let data = Snapshot::read(&store as &dyn Backend, b"/registry/")
            .await
            .unwrap()
            .encode();
        saves.push(start.elapsed());
        size = data.len();
        let target = dir.path().join(format!("restored-{run}"));
        let start = Instant::now();
        let restored = tokio::task::spawn_blocking(move || {
            Snapshot::decode(&data)
                .unwrap()
                .restore(&target, 1_000_000_000)
        })
        .await
        .unwrap()
        .unwrap();
        restores.push(start.elapsed());
        assert!(restored.0 > 1_000_000_000);
    }
    store.close().await.unwrap();
    println!(
        "| snapshot of {PODS} objects of {} KiB: save (read + encode), median | {} ({:.1} MB) | — | — |",
        VALUE / 1024,
        ms(median_dur(saves)),
        size as f64 / 1e6
    );
    println!(
        "| the same snapshot restored into a new data directory (decode + write + sync), median | {} | — | — |",
        ms(median_dur(restores))
    );
}
