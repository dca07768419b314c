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

use apimachinery::hash::{fnv32a, safe_encode_string};

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
    use apimachinery::hash::SAFE_ALPHABET;

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
