//! Names and UIDs of new objects: random, as kube-apiserver makes them (`generateName` + 5
//! characters of `k8s.io/apiserver/pkg/storage/names`' alphabet; a version-4 UUID as
//! `uuid.NewUUID`), or drawn from a seed (`--seed`, no Kubernetes counterpart) so that a
//! scenario run twice on a fresh cluster names every object the same.
//!
//! ```text
//!   random:  web-7d4b9c6f5d-  ─▶  web-7d4b9c6f5d-x2kqz      (a new draw each time)
//!   seeded:  the n-th name made from a base = f(seed, base, n)
//!            the n-th UID made for a key    = f(seed, resource/namespace/name, n)
//! ```
//!
//! Seeded, which of two concurrent creates gets which name may differ from run to run, never
//! the names made; a UID follows its object's key, so an object keeps its UID whichever
//! request made it. The counters start again when the API server does, so a server started
//! on a store that already holds objects mixes the store's revision into the seed and does
//! not draw the names it made before (a name that is taken anyway is drawn again, as any
//! generated name: `handlers::create`). The seeded counters hold one entry per base and per
//! key created: a seed is for scenarios, not for clusters of millions of objects.

use std::collections::HashMap;
use std::sync::Mutex;

use apimachinery::hash::{SAFE_ALPHABET as ALPHABET, fnv64a};
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

/// Characters a generated suffix adds.
const SUFFIX_LEN: usize = 5;

/// The longest base kept before the suffix (names are at most 63 characters).
const MAX_BASE: usize = 63 - SUFFIX_LEN;

/// Where new objects' names and UIDs come from.
#[derive(Debug, Default)]
pub struct Ids {
    seeded: Option<Seeded>,
}

#[derive(Debug)]
struct Seeded {
    seed: u64,
    /// How many names each base gave, and UIDs each key.
    counters: Mutex<HashMap<String, u64>>,
}

impl Ids {
    /// Random names and UIDs, as kube-apiserver's.
    pub fn random() -> Ids {
        Ids::default()
    }

    /// Names and UIDs from `seed`, on a store whose revision is `revision` when the server
    /// starts (0 or the bootstrap's for a fresh cluster).
    pub fn seeded(seed: u64, revision: u64) -> Ids {
        Ids {
            seeded: Some(Seeded {
                seed: fnv64a(&[&seed.to_le_bytes(), &revision.to_le_bytes()]),
                counters: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Whether names come from a seed.
    pub fn is_seeded(&self) -> bool {
        self.seeded.is_some()
    }

    /// `base` (cut to 58 characters) + 5 characters.
    pub fn name(&self, base: &str) -> String {
        let base: String = base.chars().take(MAX_BASE).collect();
        let suffix: String = self.draw("name", &base, |rng| {
            (0..SUFFIX_LEN)
                .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
                .collect()
        });
        format!("{base}{suffix}")
    }

    /// A version-4 UUID for the object at `key` (resource, namespace and name).
    pub fn uid(&self, key: &str) -> String {
        let mut bytes = [0u8; 16];
        self.draw("uid", key, |rng| rng.fill_bytes(&mut bytes));
        uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .to_string()
    }

    /// Runs `f` on the generator of one draw: the thread's for random ids, else one seeded
    /// with the seed, the kind of draw, `of` and how many draws `of` has had.
    fn draw<T>(&self, kind: &str, of: &str, f: impl FnOnce(&mut dyn RngCore) -> T) -> T {
        let Some(seeded) = &self.seeded else {
            return f(&mut rand::rng());
        };
        let key = format!("{kind}\0{of}");
        let n = {
            let mut counters = seeded.counters.lock().unwrap_or_else(|e| e.into_inner());
            let count = counters.entry(key.clone()).or_insert(0);
            *count += 1;
            *count
        };
        f(&mut StdRng::seed_from_u64(fnv64a(&[
            &seeded.seed.to_le_bytes(),
            key.as_bytes(),
            &n.to_le_bytes(),
        ])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_name_is_the_base_and_five_characters_of_the_alphabet() {
        for ids in [Ids::random(), Ids::seeded(7, 0)] {
            let n = ids.name("web-");
            assert!(n.starts_with("web-") && n.len() == 9, "{n}");
            assert!(n[4..].bytes().all(|b| ALPHABET.contains(&b)), "{n}");
            assert_eq!(ids.name(&"x".repeat(80)).len(), 63);
        }
    }

    #[test]
    fn a_seed_gives_the_same_names_and_uids_in_the_same_order_per_base() {
        let draw = |ids: &Ids| {
            // Interleaved differently: each base and key has its own sequence.
            let a = [ids.name("web-"), ids.name("web-")];
            let b = ids.name("db-");
            let u = [ids.uid("pods/default/web-1"), ids.uid("pods/default/web-1")];
            (a, b, u)
        };
        let first = draw(&Ids::seeded(42, 0));
        let other_order = {
            let ids = Ids::seeded(42, 0);
            let b = ids.name("db-");
            let u0 = ids.uid("pods/default/web-1");
            let a0 = ids.name("web-");
            let u1 = ids.uid("pods/default/web-1");
            let a1 = ids.name("web-");
            ([a0, a1], b, [u0, u1])
        };
        assert_eq!(first, other_order);
        assert_ne!(first.0[0], first.0[1], "the second name is a new draw");
        assert_ne!(
            first.2[0], first.2[1],
            "a name created again gets a new UID"
        );
        assert!(uuid::Uuid::parse_str(&first.2[0]).is_ok());
        assert_ne!(
            first,
            draw(&Ids::seeded(43, 0)),
            "another seed, other names"
        );
        assert_ne!(
            first,
            draw(&Ids::seeded(42, 99)),
            "a restarted store, other names"
        );
    }

    #[test]
    fn random_ids_differ() {
        let ids = Ids::random();
        assert!(!ids.is_seeded());
        assert_ne!(ids.uid("pods/default/a"), ids.uid("pods/default/a"));
    }
}
