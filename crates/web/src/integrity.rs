//! Integrity values of the model files kept in the browser cache (`crate::store`).
//!
//! When a file is stored, its length and a 64-bit checksum go into a header of the cached response
//! (`x-attnlab-integrity: v1 len=<bytes> fnv64=<16 hex digits>`); when it is read back both are
//! checked, so a truncated or altered entry is noticed, deleted and fetched again. The checksum is
//! FNV-1a over little-endian 64-bit words (then the tail bytes): not cryptographic, it only has to
//! catch storage corruption, and a word at a time it costs ~1 ms per MB in wasm. Plain Rust,
//! compiled and tested natively.

/// The cached response's header that holds the integrity value.
pub const HEADER: &str = "x-attnlab-integrity";

const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a over 64-bit little-endian words, then over the remaining bytes one at a time.
pub fn checksum(bytes: &[u8]) -> u64 {
    let mut h = OFFSET;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(w);
        h = (h ^ u64::from_le_bytes(word)).wrapping_mul(PRIME);
    }
    for &b in words.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(PRIME);
    }
    h
}

/// The integrity value stored with `bytes`.
pub fn value(bytes: &[u8]) -> String {
    format!("v1 len={} fnv64={:016x}", bytes.len(), checksum(bytes))
}

/// Check `bytes` against a stored integrity value; the error says what differs.
pub fn verify(stored: Option<&str>, bytes: &[u8]) -> Result<(), String> {
    let stored = stored.ok_or_else(|| format!("no {HEADER} header"))?;
    let mut len: Option<u64> = None;
    let mut sum: Option<u64> = None;
    let mut version_ok = false;
    for part in stored.split_whitespace() {
        if part == "v1" {
            version_ok = true;
        } else if let Some(v) = part.strip_prefix("len=") {
            len = v.parse().ok();
        } else if let Some(v) = part.strip_prefix("fnv64=") {
            sum = u64::from_str_radix(v, 16).ok();
        }
    }
    let (true, Some(len), Some(sum)) = (version_ok, len, sum) else {
        return Err(format!("unreadable integrity value {stored:?}"));
    };
    if len != bytes.len() as u64 {
        return Err(format!("{} bytes where {len} were stored", bytes.len()));
    }
    if sum != checksum(bytes) {
        return Err("the checksum differs".to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_value_verifies_its_bytes() {
        for n in [0usize, 1, 7, 8, 9, 1000] {
            let bytes: Vec<u8> = (0..n).map(|i| (i * 31 % 251) as u8).collect();
            let v = value(&bytes);
            assert!(v.starts_with(&format!("v1 len={n} fnv64=")), "{v}");
            assert_eq!(verify(Some(&v), &bytes), Ok(()));
        }
    }

    #[test]
    fn truncation_and_any_changed_byte_are_caught() {
        let bytes: Vec<u8> = (0..64u32).map(|i| (i * 7) as u8).collect();
        let v = value(&bytes);
        let err = verify(Some(&v), &bytes[..40]).unwrap_err();
        assert!(err.contains("40 bytes where 64"), "{err}");
        for i in 0..bytes.len() {
            let mut changed = bytes.clone();
            changed[i] ^= 0x10;
            assert_eq!(verify(Some(&v), &changed), Err("the checksum differs".to_string()), "byte {i}");
        }
    }

    #[test]
    fn missing_or_garbled_values_are_errors_not_panics() {
        assert!(verify(None, b"x").unwrap_err().contains(HEADER));
        for bad in ["", "v1", "v2 len=1 fnv64=00", "v1 len=x fnv64=00", "v1 len=1 fnv64=zz"] {
            assert!(verify(Some(bad), b"x").unwrap_err().contains("unreadable"), "{bad}");
        }
    }

    #[test]
    fn the_checksum_is_fixed() {
        // Stored values must stay readable across builds: FNV-1a's offset basis for no input.
        assert_eq!(checksum(&[]), 0xcbf2_9ce4_8422_2325);
        assert_ne!(checksum(b"abcdefgh"), checksum(b"abcdefgi"));
    }
}
