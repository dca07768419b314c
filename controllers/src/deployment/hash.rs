//! The `pod-template-hash`: a short, stable name for a pod template.
//!
//! Mirrors `ComputeHash` in `pkg/controller/controller_utils.go`, `DeepHashObject` in
//! `pkg/util/hash/hash.go` and `SafeEncodeString` in
//! `staging/src/k8s.io/apimachinery/pkg/util/rand/rand.go`.
//!
//! ```text
//!   template ──serialize──▶ bytes ─┐
//!   collisionCount (u32 LE) ───────┴─▶ FNV-1a 32 ─▶ 3011482580 ─▶ each decimal digit
//!                                                    mapped into "bcdfghjklmnpqrstvwxz2456789"
//! ```
//!
//! The result names the ReplicaSet (`nginx-<hash>`) and labels its pods, so two templates
//! never share pods. `collisionCount` is bumped when a ReplicaSet of that name exists with
//! another template, which changes the hash.
//!
//! Unlike Kubernetes, the template is serialized as JSON (k8s-openapi's field order, sorted
//! maps) rather than with Go's `spew` printer, so hashes differ from a real cluster's; they
//! are stable across runs and use the same alphabet and length (≤ 10 characters).

use k8s_openapi::api::core::v1::PodTemplateSpec;

/// The alphabet of `rand.SafeEncodeString`: no vowels (no words), no `0 1 3` (look-alikes).
pub const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// FNV-1a, 32 bit (Go's `hash/fnv.New32a`).
pub fn fnv32a(chunks: &[&[u8]]) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for chunk in chunks {
        for &byte in *chunk {
            hash ^= u32::from(byte);
            hash = hash.wrapping_mul(0x0100_0193);
        }
    }
    hash
}

/// `rand.SafeEncodeString`: each byte mapped to `SAFE_ALPHABET[byte % 27]`.
pub fn safe_encode_string(s: &str) -> String {
    s.bytes()
        .map(|b| char::from(SAFE_ALPHABET[usize::from(b) % SAFE_ALPHABET.len()]))
        .collect()
}

/// `ComputeHash`: the pod-template-hash of `template` with `collision_count`.
pub fn compute_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    // Serializing a k8s-openapi struct cannot fail (no non-string map keys); fall back to the
    // Debug form rather than panic.
    let bytes =
        serde_json::to_vec(template).unwrap_or_else(|_| format!("{template:?}").into_bytes());
    let collision = collision_count.map(|c| (c as u32).to_le_bytes());
    let sum = match &collision {
        Some(c) => fnv32a(&[&bytes, c]),
        None => fnv32a(&[&bytes]),
    };
    safe_encode_string(&sum.to_string())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn template(image: &str) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(BTreeMap::from([("app".to_string(), "nginx".to_string())])),
                ..Default::default()
            }),
            spec: Some(k8s_openapi::api::core::v1::PodSpec {
                containers: vec![k8s_openapi::api::core::v1::Container {
                    name: "nginx".into(),
                    image: Some(image.into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        }
    }

    #[test]
    fn fnv32a_known_vectors() {
        assert_eq!(fnv32a(&[b""]), 0x811c_9dc5);
        assert_eq!(fnv32a(&[b"a"]), 0xe40c_292c);
        assert_eq!(fnv32a(&[b"foo"]), 0xa9f3_7ed7);
        assert_eq!(fnv32a(&[b"fo", b"o"]), fnv32a(&[b"foo"]));
    }

    #[test]
    fn safe_encoding_maps_digits_like_kubernetes() {
        // '0' is byte 48 → 48 % 27 = 21 → '4'; '9' is 57 → 3 → 'f'.
        assert_eq!(safe_encode_string("0123456789"), "456789bcdf");
    }

    #[test]
    fn hash_is_stable_short_and_in_the_alphabet() {
        let h = compute_hash(&template("nginx:1.25"), None);
        assert_eq!(h, compute_hash(&template("nginx:1.25"), None));
        assert!(!h.is_empty() && h.len() <= 10, "{h}");
        assert!(h.bytes().all(|b| SAFE_ALPHABET.contains(&b)), "{h}");
        assert_ne!(h, compute_hash(&template("nginx:1.26"), None));
        assert_ne!(h, compute_hash(&template("nginx:1.25"), Some(1)));
        assert_ne!(
            compute_hash(&template("nginx:1.25"), Some(1)),
            compute_hash(&template("nginx:1.25"), Some(2))
        );
    }
}
