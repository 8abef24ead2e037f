//! Injected randomness: the server nonce of a SCRAM exchange and the salt of a new
//! credential come from a [`SecurityRng`], so tests replay exactly and the server decides
//! where the randomness comes from.

use std::fmt;

/// Source of random bits for nonces and salts.
///
/// The server must back this with a cryptographically secure, OS-seeded generator (a
/// guessable server nonce lets a recorded exchange be replayed; Kafka uses
/// `SecureRandom`). Tests use [`SplitMix64`] with a fixed seed.
pub trait SecurityRng: fmt::Debug + Send {
    /// Next 64 random bits.
    fn next_u64(&mut self) -> u64;
}

/// The seeded generator of tests and simulations (`sluice_kafka::rng`); not a CSPRNG.
pub use sluice_kafka::rng::SplitMix64;

impl SecurityRng for SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        SplitMix64::next_u64(self)
    }
}

/// Kafka's `ScramFormatter.secureRandomString`: a 130-bit random number written in base
/// 36 (`new BigInteger(130, random).toString(36)`), at most 26 characters of `[0-9a-z]`.
/// Kafka uses it for server nonces and, as its UTF-8 bytes, for salts.
pub fn secure_random_string(rng: &mut dyn SecurityRng) -> String {
    // 130 bits as three limbs, most significant first: 2 + 64 + 64 bits.
    let mut limbs = [rng.next_u64() & 0b11, rng.next_u64(), rng.next_u64()];
    let mut digits = Vec::with_capacity(26);
    while limbs.iter().any(|&l| l != 0) {
        let mut rem: u128 = 0;
        for limb in &mut limbs {
            let cur = (rem << 64) | u128::from(*limb);
            *limb = (cur / 36) as u64;
            rem = cur % 36;
        }
        digits.push(char::from_digit(rem as u32, 36).expect("a remainder below 36"));
    }
    if digits.is_empty() {
        digits.push('0');
    }
    digits.iter().rev().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Fixed(Vec<u64>);

    impl SecurityRng for Fixed {
        fn next_u64(&mut self) -> u64 {
            self.0.remove(0)
        }
    }

    #[test]
    fn base36_of_130_bits() {
        assert_eq!(secure_random_string(&mut Fixed(vec![0, 0, 0])), "0");
        assert_eq!(secure_random_string(&mut Fixed(vec![0, 0, 35])), "z");
        assert_eq!(secure_random_string(&mut Fixed(vec![0, 0, 36])), "10");
        // 2^130 - 1 in base 36 (BigInteger's largest 130-bit value): 26 digits.
        let max = secure_random_string(&mut Fixed(vec![u64::MAX, u64::MAX, u64::MAX]));
        assert_eq!(max, "1omfro7zwmumr3umxudzyj6scf");
        assert_eq!(max.len(), 26);
    }

    #[test]
    fn same_seed_same_strings() {
        let a = secure_random_string(&mut SplitMix64::new(3));
        let b = secure_random_string(&mut SplitMix64::new(3));
        assert_eq!(a, b);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase())
        );
    }
}
