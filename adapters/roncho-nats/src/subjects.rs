//! Where a work unit's tasks travel: the subject and partition derived from
//! its Honcho `work_unit_key`. This mapping is part of the wire contract —
//! every process of a deployment must agree on it — so it only changes with
//! a new stream.
//!
//! `{prefix}.work.{task_type}.{partition}.{key_token}`, where `key_token` is
//! the 32 hex digits of FNV-1a-128 over the key (ids may hold any character,
//! `.` and `*` included, so the key itself never appears in a subject) and
//! `partition` is MurmurHash3's 64-bit finaliser over the hash's two halves
//! XORed, modulo the partition count (FNV alone spreads keys that differ in
//! their last bytes badly).

/// FNV-1a, 128 bits.
fn fnv1a_128(bytes: &[u8]) -> u128 {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    bytes
        .iter()
        .fold(OFFSET, |hash, byte| (hash ^ u128::from(*byte)).wrapping_mul(PRIME))
}

/// MurmurHash3's 64-bit finaliser (full avalanche).
fn fmix64(mut value: u64) -> u64 {
    value ^= value >> 33;
    value = value.wrapping_mul(0xff51_afd7_ed55_8ccd);
    value ^= value >> 33;
    value = value.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    value ^ (value >> 33)
}

/// The task type of a key, made subject-safe (an unknown type with odd
/// characters becomes `other`).
pub fn task_token(work_unit_key: &str) -> &str {
    let kind = roncho_core::queue::task_type(work_unit_key);
    if !kind.is_empty() && kind.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'_') {
        kind
    } else {
        "other"
    }
}

/// The partition (`0..partitions`) a work unit belongs to.
pub fn partition(work_unit_key: &str, partitions: u32) -> u32 {
    let hash = fnv1a_128(work_unit_key.as_bytes());
    let mixed = fmix64((hash >> 64) as u64 ^ hash as u64);
    u32::try_from(mixed % u64::from(partitions.max(1))).unwrap_or(0)
}

/// The subject a task of `work_unit_key` is published on.
pub fn subject(prefix: &str, work_unit_key: &str, partitions: u32) -> String {
    format!(
        "{prefix}.work.{}.{}.{:032x}",
        task_token(work_unit_key),
        partition(work_unit_key, partitions),
        fnv1a_128(work_unit_key.as_bytes())
    )
}

/// The lease (KV key) and consumer of one partition of a task type: `{type}.{p}`.
pub fn lease_key(task_type: &str, partition: u32) -> String {
    format!("{task_type}.{partition}")
}

/// The lease key of the partition `work_unit_key` belongs to.
pub fn lease_key_of(work_unit_key: &str, partitions: u32) -> String {
    lease_key(task_token(work_unit_key), partition(work_unit_key, partitions))
}

/// Whether `token` can name a stream, bucket or subject token.
pub fn valid_token(token: &str) -> bool {
    !token.is_empty()
        && token
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_key_makes_a_safe_subject() {
        let key = "representation:w.1:s *>:bob.smith";
        let subject = subject("roncho", key, 16);
        let tokens: Vec<&str> = subject.split('.').collect();
        assert_eq!(tokens.len(), 5, "{subject}");
        assert_eq!(&tokens[..3], ["roncho", "work", "representation"]);
        assert!(tokens[3].parse::<u32>().unwrap() < 16);
        assert_eq!(tokens[4].len(), 32);
        assert!(tokens.iter().all(|token| valid_token(token)), "{subject}");
        assert_eq!(task_token("we.ird:x"), "other");
    }

    #[test]
    fn partitions_are_stable_and_spread() {
        // Part of the wire contract: these values must never change.
        assert_eq!(fnv1a_128(b""), 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d);
        assert_eq!(fnv1a_128(b"a"), 0xd228_cb69_6f1a_8caf_7891_2b70_4e4a_8964);
        let mut seen = [0_u32; 8];
        for unit in 0..800 {
            seen[partition(&format!("representation:w:s{unit}:bob"), 8) as usize] += 1;
        }
        assert!(seen.iter().all(|count| (60..140).contains(count)), "{seen:?}");
        assert_eq!(
            lease_key_of("summary:w:s:None:None", 4),
            lease_key("summary", partition("summary:w:s:None:None", 4))
        );
    }
}
