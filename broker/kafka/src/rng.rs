//! The seeded generator of tests and simulations: every crate that injects randomness
//! (`sluice_group::MemberIdRng`, `sluice_security::rng::SecurityRng`) implements its trait
//! for [`SplitMix64`], and the simulators draw from it, so a seed replays a whole run.

/// A small deterministic generator (Steele, Lea, Flood: SplitMix64). For tests and
/// simulations, and for the server only when seeded from the OS: it is not a CSPRNG.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator starting from `seed`.
    #[must_use]
    pub const fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (by remainder: a slight bias, fine for simulations). `n` > 0.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        self.next_u64() % n
    }

    /// True with probability `per_mille` / 1000.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_sequence() {
        // SplitMix64 from seed 0 (the values of Vigna's reference implementation).
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn same_seed_same_draws() {
        let (mut a, mut b) = (SplitMix64::new(9), SplitMix64::new(9));
        for _ in 0..100 {
            assert_eq!(a.below(7), b.below(7));
        }
        assert!((0..1000).all(|_| !a.chance(0)) && (0..1000).all(|_| a.chance(1000)));
    }
}
