//! JSON Web Tokens signed with ES256 (ECDSA P-256, SHA-256): the format of ServiceAccount
//! tokens.
//!
//! Mirrors what kube-apiserver's token generator and validator do with go-jose
//! (`pkg/serviceaccount/jwt.go`: `JWTTokenGenerator`, `jwtTokenAuthenticator`): a compact
//! JWS `base64url(header).base64url(claims).base64url(signature)` whose header names the
//! algorithm and the key id, the key id being `base64url(sha256(PKIX public key))`
//! (`keyIDFromPublicKey`).
//!
//! ```text
//!   {"alg":"ES256","kid":"<key id>"} . {"aud":[..],"exp":..,"iss":..,"sub":..,...} . r||s
//! ```

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _,
    UnparsedPublicKey,
};
use serde_json::Value;
use std::sync::Arc;

/// The DER prefix of a P-256 public key in PKIX form (`SubjectPublicKeyInfo` with
/// id-ecPublicKey and prime256v1), before the 65-byte uncompressed point.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// A signing key: an ECDSA P-256 key pair and its key id.
pub struct SigningKey {
    pair: EcdsaKeyPair,
    key_id: String,
    rng: SystemRandom,
    /// Tokens whose signature this key verified, with their claims ([`SigningKey::verify`]).
    verified: std::sync::Mutex<std::collections::HashMap<String, Arc<Value>>>,
}

/// Tokens a [`SigningKey`] remembers before it forgets them all and starts again.
const MAX_REMEMBERED_TOKENS: usize = 4096;

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// A new random key, as PKCS#8 DER (to keep) and the key.
    pub fn generate() -> Result<(Vec<u8>, SigningKey), String> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| "cannot generate an ECDSA P-256 key".to_string())?;
        let key = SigningKey::from_pkcs8(pkcs8.as_ref())?;
        Ok((pkcs8.as_ref().to_vec(), key))
    }

    /// The key in PKCS#8 DER (an EC P-256 `PRIVATE KEY`).
    pub fn from_pkcs8(der: &[u8]) -> Result<SigningKey, String> {
        let rng = SystemRandom::new();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng)
            .map_err(|e| format!("not an ECDSA P-256 key in PKCS#8: {e}"))?;
        let mut spki = P256_SPKI_PREFIX.to_vec();
        spki.extend_from_slice(pair.public_key().as_ref());
        let key_id = URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, &spki));
        Ok(SigningKey {
            pair,
            key_id,
            rng,
            verified: std::sync::Mutex::default(),
        })
    }

    /// The key id (`kid`) tokens carry.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// A signed token carrying `claims`.
    pub fn sign(&self, claims: &Value) -> Result<String, String> {
        let header = serde_json::json!({"alg": "ES256", "kid": self.key_id});
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = self
            .pair
            .sign(&self.rng, input.as_bytes())
            .map_err(|_| "signing failed".to_string())?;
        Ok(format!(
            "{input}.{}",
            URL_SAFE_NO_PAD.encode(signature.as_ref())
        ))
    }

    /// The claims of `token` if it is a compact JWS signed by this key, else why not.
    ///
    /// A token verified once is remembered with its claims: the same bytes under the same key
    /// are the same verdict, so a client's every request costs one map lookup instead of an
    /// ECDSA verification. What can change (expiry, the ServiceAccount's existence) is checked
    /// by the callers on every request. Refusals are not remembered.
    pub fn verify(&self, token: &str) -> Result<Arc<Value>, String> {
        let lock = || {
            self.verified
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some(claims) = lock().get(token) {
            return Ok(claims.clone());
        }
        let claims = Arc::new(self.verify_signature(token)?);
        let mut verified = lock();
        if verified.len() >= MAX_REMEMBERED_TOKENS {
            verified.clear();
        }
        verified.insert(token.to_owned(), claims.clone());
        Ok(claims)
    }

    /// [`SigningKey::verify`] without the memo.
    fn verify_signature(&self, token: &str) -> Result<Value, String> {
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("not a compact JWS".into());
        };
        let decode = |part: &str, what: &str| {
            URL_SAFE_NO_PAD
                .decode(part)
                .map_err(|e| format!("malformed {what}: {e}"))
        };
        let head: Value = serde_json::from_slice(&decode(header, "header")?)
            .map_err(|e| format!("malformed header: {e}"))?;
        if head["alg"] != "ES256" {
            return Err(format!("unexpected signing algorithm {}", head["alg"]));
        }
        let signature = decode(signature, "signature")?;
        let input = &token[..header.len() + 1 + payload.len()];
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, self.pair.public_key().as_ref())
            .verify(input.as_bytes(), &signature)
            .map_err(|_| "invalid signature".to_string())?;
        serde_json::from_slice(&decode(payload, "claims")?)
            .map_err(|e| format!("malformed claims: {e}"))
    }
}

/// The claims of a token without checking anything: whether it even looks like a JWT and who
/// claims to have issued it, to pick the authenticator (`hasCorrectIssuer`).
pub fn unverified_claims(token: &str) -> Option<Value> {
    let mut parts = token.split('.');
    let (_, payload, _) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn signed_tokens_verify_and_tampered_ones_do_not() {
        let (pkcs8, key) = SigningKey::generate().unwrap();
        let again = SigningKey::from_pkcs8(&pkcs8).unwrap();
        assert_eq!(key.key_id(), again.key_id());
        assert_eq!(key.key_id().len(), 43, "base64url of a SHA-256");
        let token = key
            .sign(&json!({"sub": "system:serviceaccount:a:b"}))
            .unwrap();
        assert_eq!(
            again.verify(&token).unwrap()["sub"],
            "system:serviceaccount:a:b"
        );
        assert_eq!(
            unverified_claims(&token).unwrap()["sub"],
            "system:serviceaccount:a:b"
        );
        // Remembered once verified; a refusal is not remembered, and a tampered token is not
        // the remembered one.
        assert_eq!(key.verify(&token).unwrap(), key.verify(&token).unwrap());
        let (_, other) = SigningKey::generate().unwrap();
        assert_eq!(other.verify(&token).unwrap_err(), "invalid signature");
        assert_eq!(other.verify(&token).unwrap_err(), "invalid signature");
        let mut parts: Vec<&str> = token.split('.').collect();
        let forged =
            URL_SAFE_NO_PAD.encode(json!({"sub": "system:serviceaccount:a:admin"}).to_string());
        parts[1] = &forged;
        assert_eq!(
            key.verify(&parts.join(".")).unwrap_err(),
            "invalid signature"
        );
        assert!(key.verify("a.b").is_err());
        assert!(unverified_claims("not-a-jwt").is_none());
    }
}
