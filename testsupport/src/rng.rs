//! A small seeded generator (xorshift64*): the same seed replays the same sequence,
//! so a failing randomised test can be run again as it was.

/// The generator; its state is the `u64` (`Rng(seed)` starts from `seed` as it is,
/// [`Rng::new`] mixes it first). A state of zero stays zero: seed with a non-zero
/// value.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// A generator for `seed`, mixed so that nearby seeds give unrelated sequences
    /// (and never zero).
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next number. (Not an `Iterator`: the sequence never ends, and callers want
    /// the number, not an `Option`.)
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    /// One of `items`, uniformly. Panics if there is none.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n + 8);
        while out.len() < n {
            out.extend_from_slice(&self.next().to_le_bytes());
        }
        out.truncate(n);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_replays_the_same_sequence() {
        let a: Vec<u64> = (0..5).scan(Rng::new(7), |r, _| Some(r.next())).collect();
        let b: Vec<u64> = (0..5).scan(Rng::new(7), |r, _| Some(r.next())).collect();
        let c: Vec<u64> = (0..5).scan(Rng::new(8), |r, _| Some(r.next())).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mut r = Rng::new(1);
        for _ in 0..1000 {
            assert!(r.below(3) < 3);
            assert!((5..=9).contains(&r.range(5, 9)));
        }
        assert_eq!(r.below(0), 0);
        assert_eq!(r.bytes(13).len(), 13);
    }
}
