//! The operating system's randomness, read in one place: `getrandom(2)`, the kernel's
//! CSPRNG (it blocks only until the kernel's pool is first initialised, early at boot).
//!
//! Everything the broker and the CLI draw at random comes from [`OsRng`]: SCRAM nonces and
//! salts (`sluice_security::rng::SecurityRng`: a guessable nonce lets a recorded exchange
//! be replayed), consumer-group member ids (`sluice_group::MemberIdRng`: they act as weak
//! credentials), topic ids and the cluster id. Tests inject `sluice_kafka::rng::SplitMix64`
//! through the same traits instead.

use std::io;

/// The kernel's CSPRNG, through `getrandom(2)`.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsRng;

impl OsRng {
    /// Fills `bytes` with random bytes.
    ///
    /// # Errors
    /// The kernel refused (no `getrandom(2)`: a kernel before 3.17).
    pub fn fill(bytes: &mut [u8]) -> io::Result<()> {
        let mut filled = 0;
        while filled < bytes.len() {
            let rest = &mut bytes[filled..];
            // SAFETY: getrandom writes at most `rest.len()` bytes into `rest`.
            let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
            match usize::try_from(n) {
                Ok(n) => filled += n,
                Err(_) => {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
        }
        Ok(())
    }

    /// 64 random bits. Panics if the kernel refuses: the broker cannot work without
    /// randomness (an environment it does not support, not bad input).
    pub fn next_u64(self) -> u64 {
        let mut bytes = [0u8; 8];
        Self::fill(&mut bytes).expect("getrandom(2) failed");
        u64::from_le_bytes(bytes)
    }
}

impl sluice_security::rng::SecurityRng for OsRng {
    fn next_u64(&mut self) -> u64 {
        OsRng::next_u64(*self)
    }
}

impl sluice_group::MemberIdRng for OsRng {
    fn next_u64(&mut self) -> u64 {
        OsRng::next_u64(*self)
    }
}

/// 22 random URL-safe characters (`random.rs`; Kafka's cluster ids are 22-character
/// base64 UUIDs). Never starting with `-`, as Kafka's `Uuid.randomUuid` avoids it: such an
/// id given to a command line (`--cluster-id -x...`) reads as a flag.
pub fn random_id() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    loop {
        let mut bytes = [0u8; 22];
        OsRng::fill(&mut bytes).expect("getrandom(2) failed");
        let id: String = bytes
            .iter()
            .map(|b| char::from(ALPHABET[usize::from(b & 63)]))
            .collect();
        if !id.starts_with('-') {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_ids_never_start_with_a_dash() {
        // Regression: a test cluster's `sluice cluster format --cluster-id -...` failed,
        // the id read as a flag (1 in 64 ids).
        for _ in 0..2_000 {
            let id = random_id();
            assert_eq!(id.len(), 22);
            assert!(!id.starts_with('-'), "{id}");
        }
    }

    #[test]
    fn fills_any_length_and_draws_differ() {
        let mut big = vec![0u8; 1024];
        OsRng::fill(&mut big).unwrap();
        assert!(big.iter().any(|&b| b != 0));
        OsRng::fill(&mut []).unwrap();
        assert_ne!(OsRng.next_u64(), OsRng.next_u64());
    }
}
