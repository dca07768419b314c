//! The hashes and the name alphabet Kubernetes' controllers and API server name things with:
//! Go's `hash/fnv` (FNV-1 and FNV-1a) and `SafeEncodeString` with its alphabet from
//! `k8s.io/apimachinery/pkg/util/rand`, whose 27 characters also make `generateName`'s
//! suffixes (`k8s.io/apiserver/pkg/storage/names`).
//!
//! ```text
//!   pod-template-hash    FNV-1a 32 of the template ─▶ decimal digits ─▶ SafeEncodeString
//!   ControllerRevision   FNV-1 32 of the data      ─▶ decimal digits ─▶ SafeEncodeString
//!   seeded names, ties   FNV-1a 64 (a hash that is the same in every build)
//! ```

/// `rand`'s alphabet: no vowels (no words), no `0 1 3` (look-alikes).
pub const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `rand.SafeEncodeString`: each byte mapped to `SAFE_ALPHABET[byte % 27]`.
pub fn safe_encode_string(s: &str) -> String {
    s.bytes()
        .map(|b| char::from(SAFE_ALPHABET[usize::from(b) % SAFE_ALPHABET.len()]))
        .collect()
}

/// FNV-1a, 32 bit (Go's `hash/fnv.New32a`), over the chunks in turn.
pub fn fnv32a(chunks: &[&[u8]]) -> u32 {
    chunks
        .iter()
        .flat_map(|c| c.iter())
        .fold(0x811c_9dc5, |h: u32, &b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        })
}

/// FNV-1, 32 bit (Go's `hash/fnv.New32`), over the chunks in turn.
pub fn fnv32(chunks: &[&[u8]]) -> u32 {
    chunks
        .iter()
        .flat_map(|c| c.iter())
        .fold(0x811c_9dc5, |h: u32, &b| {
            h.wrapping_mul(0x0100_0193) ^ u32::from(b)
        })
}

/// FNV-1a, 64 bit (Go's `hash/fnv.New64a`), over the chunks in turn.
pub fn fnv64a(chunks: &[&[u8]]) -> u64 {
    chunks
        .iter()
        .flat_map(|c| c.iter())
        .fold(0xcbf2_9ce4_8422_2325, |h: u64, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_known_vectors() {
        assert_eq!(fnv32a(&[b""]), 0x811c_9dc5);
        assert_eq!(fnv32a(&[b"a"]), 0xe40c_292c);
        assert_eq!(fnv32a(&[b"foo"]), 0xa9f3_7ed7);
        assert_eq!(fnv32a(&[b"fo", b"o"]), fnv32a(&[b"foo"]));
        assert_eq!(fnv32(&[b"a"]), 0x050c_5d7e);
        assert_eq!(fnv64a(&[b""]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv64a(&[b"a"]), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv64a(&[b"fo", b"o"]), fnv64a(&[b"foo"]));
    }

    #[test]
    fn safe_encoding_maps_digits_like_kubernetes() {
        // '0' is byte 48 → 48 % 27 = 21 → '4'; '9' is 57 → 3 → 'f'.
        assert_eq!(safe_encode_string("0123456789"), "456789bcdf");
    }
}
