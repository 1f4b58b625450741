//! The vocabulary: token bytes -> rank (= token id), laid out for the
//! encoder's hot loop, and the packing of short byte strings into integers
//! that it (and training's chunk counts) use as hash keys.
//!
//! The bottom of the module order (see `lib.rs`): it depends on nothing else
//! here.

use rustc_hash::FxHashMap;

pub type Rank = u32;

/// The largest id a vocabulary may use. The decoder is a table indexed by id,
/// so a file claiming id 4,000,000,000 must be refused, not allocated; 2^24
/// (16.7M) is 80 times the largest vocabulary in use (o200k: 200k).
pub const MAX_ID: Rank = (1 << 24) - 1;

/// "No token": the rank of a byte string that is not in the vocabulary.
pub(crate) const NONE: Rank = Rank::MAX;

/// Token bytes -> rank, laid out for the encoder's hot loop.
///
/// Encoding is almost all look-ups of short byte strings: the whole chunk
/// first, then, for chunks that are not one token, every adjacent pair and
/// every pair of merged parts. A `HashMap<Vec<u8>, Rank>` costs two cache
/// misses per look-up (the bucket, then the key's heap bytes to compare) and
/// hashes byte by byte. Instead:
///   * single bytes and byte pairs index flat tables (1 KiB and 256 KiB): the
///     first n-1 look-ups of every merge involve no hashing at all;
///   * tokens of 3..=15 bytes are packed into an integer key (bytes plus
///     length; a `u64` up to 7 bytes, else a `u128`), so a look-up is one
///     multiply-hash and one probe with the key inline;
///   * longer tokens (under 1% of a vocabulary, and rarely looked up) keep a
///     byte-string map;
///   * tokens of exactly 3, 4 and 8 bytes have a map each, keyed by just
///     their bytes (a `u32`, a `u32`, a `u64`): an entry of 8 bytes instead
///     of 16 (3-4 bytes) or 16 instead of 32 (8 bytes). The 3- and 4-byte
///     tokens (" the", " and", " of") are the chunks looked up most, and
///     their maps (~400 KiB for cl100k, where the one map of 3..=7-byte
///     tokens was 2 MiB) stay in the CPU's L2 cache.
///
/// This made the merge part of encoding about 2× faster than one map.
pub struct Vocab {
    pub(crate) byte: [Rank; 256],
    pair: Box<[Rank]>,
    three: FxHashMap<u32, Rank>,
    four: FxHashMap<u32, Rank>,
    /// Tokens of 5..=7 bytes, by `pack_small`.
    small: FxHashMap<u64, Rank>,
    eight: FxHashMap<u64, Rank>,
    /// Tokens of 9..=15 bytes, by `pack`.
    short: FxHashMap<u128, Rank>,
    long: FxHashMap<Box<[u8]>, Rank>,
    /// A bit per hash of a 3..=8-byte key (`filter_key`), set for every token
    /// of those lengths: a clear bit says a string is no token without a
    /// probe into the maps, which the merges' look-ups of pairs mostly miss.
    maybe: Box<[u64]>,
}

/// The filter's size in bits (128 KiB).
const FILTER_BITS: u32 = 20;

/// The filter's key of 3..=8 bytes: `pack_small`'s, and an 8-byte string's
/// bytes (which may equal a shorter one's key: a false "maybe", harmless).
/// (Longer strings too, folded from `pack`, gained nothing measurable.)
#[inline(always)]
fn filter_key(b: &[u8]) -> u64 {
    if b.len() == 8 {
        u64_at(b)
    } else {
        pack_small(b)
    }
}

/// `r` if it is below `limit`, else `NONE`.
#[inline(always)]
fn below(r: Rank, limit: Rank) -> Rank {
    if r < limit {
        r
    } else {
        NONE
    }
}

/// The filter's bit for `key`: the word and the mask.
#[inline(always)]
fn filter_bit(key: u64) -> (usize, u64) {
    let h = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - FILTER_BITS);
    ((h >> 6) as usize, 1 << (h & 63))
}

/// An empty vocabulary (no tokens, not even the 256 bytes).
impl Default for Vocab {
    fn default() -> Vocab {
        Vocab {
            byte: [NONE; 256],
            pair: vec![NONE; 1 << 16].into_boxed_slice(),
            three: FxHashMap::default(),
            four: FxHashMap::default(),
            small: FxHashMap::default(),
            eight: FxHashMap::default(),
            short: FxHashMap::default(),
            long: FxHashMap::default(),
            maybe: vec![0; 1 << (FILTER_BITS - 6)].into_boxed_slice(),
        }
    }
}

/// Packs up to 15 bytes into a u128: the bytes little-endian, the length in
/// the top byte (so "ab\0" and "ab" differ). Training counts chunks by it too.
///
/// Built from two overlapping loads instead of a byte copy (which compiles to
/// a `memcpy` call for a variable length): this look-up runs once per chunk.
#[inline]
pub(crate) fn pack(b: &[u8]) -> u128 {
    let n = b.len();
    debug_assert!(n <= 15);
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap()) as u64;
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
    let (lo, hi) = if n >= 8 {
        // hi: bytes 8..n, i.e. the top n-8 bytes of the last eight.
        let hi = if n == 8 { 0 } else { u64_at(n - 8) >> (8 * (16 - n)) };
        (u64_at(0), hi)
    } else if n >= 4 {
        // Bytes 0..4 and n-4..n; where they overlap, both hold the same bytes.
        (u32_at(0) | u32_at(n - 4) << (8 * (n - 4)), 0)
    } else {
        (b.iter().rev().fold(0u64, |acc, &x| acc << 8 | x as u64), 0)
    };
    (hi as u128) << 64 | lo as u128 | (n as u128) << 120
}

/// `pack` for 3..=7 bytes, as a u64: the bytes little-endian, the length in
/// the top byte. Most look-ups are of such short strings, and a map of 16-byte
/// entries has half the cache footprint of one with 32-byte entries.
/// (Training counts chunks of up to 7 bytes by this layout too.)
#[inline]
pub(crate) fn pack_small(b: &[u8]) -> u64 {
    let n = b.len();
    debug_assert!((3..=7).contains(&n));
    let u16_at = |i: usize| u16::from_le_bytes(b[i..i + 2].try_into().unwrap()) as u64;
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap()) as u64;
    let lo = if n >= 4 { u32_at(0) | u32_at(n - 4) << (8 * (n - 4)) } else { u16_at(0) | (b[2] as u64) << 16 };
    lo | (n as u64) << 56
}

/// Three bytes as a `u32`, little-endian (the key of a 3-byte token).
#[inline(always)]
fn u24_at(b: &[u8]) -> u32 {
    u16::from_le_bytes([b[0], b[1]]) as u32 | (b[2] as u32) << 16
}

/// Four bytes as a `u32`, little-endian (the key of a 4-byte token).
#[inline(always)]
fn u32_at(b: &[u8]) -> u32 {
    u32::from_le_bytes(b[..4].try_into().unwrap())
}

/// Eight bytes as a `u64`, little-endian (the key of an 8-byte token).
#[inline(always)]
fn u64_at(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().unwrap())
}

/// The bytes `pack` packed.
#[cfg(test)]
fn unpack(key: u128) -> Vec<u8> {
    let bytes = key.to_le_bytes();
    bytes[..bytes[15] as usize].to_vec()
}

/// The 256 single bytes, then `extra`: the tokens of a test vocabulary
/// (token `i` has rank `i`; see `Vocab::of`).
#[cfg(test)]
pub(crate) fn bytes_then<'a>(extra: &[&'a [u8]]) -> Vec<&'a [u8]> {
    static BYTES: [u8; 256] = {
        let mut b = [0; 256];
        let mut i = 0;
        while i < 256 {
            b[i] = i as u8;
            i += 1;
        }
        b
    };
    BYTES.chunks(1).chain(extra.iter().copied()).collect()
}

/// The 256 single bytes at their own ranks, then `extra` from rank 256 (for
/// tests).
#[cfg(test)]
pub(crate) fn byte_ranks(extra: &[&str]) -> FxHashMap<Vec<u8>, Rank> {
    let mut r: FxHashMap<Vec<u8>, Rank> = (0..=255u8).map(|b| (vec![b], b as Rank)).collect();
    for (i, t) in extra.iter().enumerate() {
        r.insert(t.as_bytes().to_vec(), 256 + i as Rank);
    }
    r
}

impl Vocab {
    pub(crate) fn new(ranks: &FxHashMap<Vec<u8>, Rank>) -> Vocab {
        let mut v = Vocab::default();
        for (bytes, &r) in ranks {
            v.insert(bytes, r);
        }
        v
    }

    /// Adds a token (the trainer adds each one as it learns it). Tokens are
    /// never empty: an empty one is ignored.
    pub fn insert(&mut self, bytes: &[u8], r: Rank) {
        if (3..=8).contains(&bytes.len()) {
            let (w, bit) = filter_bit(filter_key(bytes));
            self.maybe[w] |= bit;
        }
        match bytes.len() {
            0 => {}
            1 => self.byte[bytes[0] as usize] = r,
            2 => self.pair[(bytes[0] as usize) << 8 | bytes[1] as usize] = r,
            3 => {
                self.three.insert(u24_at(bytes), r);
            }
            4 => {
                self.four.insert(u32_at(bytes), r);
            }
            5..=7 => {
                self.small.insert(pack_small(bytes), r);
            }
            8 => {
                self.eight.insert(u64_at(bytes), r);
            }
            9..=15 => {
                self.short.insert(pack(bytes), r);
            }
            _ => {
                self.long.insert(bytes.into(), r);
            }
        }
    }

    /// The vocabulary where token `i` has rank `i` (for tests).
    #[cfg(test)]
    pub(crate) fn of<T: AsRef<[u8]>>(tokens: &[T]) -> Vocab {
        let mut vocab = Vocab::default();
        for (r, t) in tokens.iter().enumerate() {
            vocab.insert(t.as_ref(), r as Rank);
        }
        vocab
    }

    /// The rank of `b`, or `NONE`.
    ///
    /// Always inlined: left to the compiler, it was a call that saved and
    /// restored five registers, once per whole chunk and twice per merge
    /// (inlining made encoding 4% faster on FLORES-200 with o200k, 2.5% on
    /// English).
    #[inline(always)]
    pub(crate) fn get(&self, b: &[u8]) -> Rank {
        match b.len() {
            0 => NONE,
            1 => self.byte[b[0] as usize],
            2 => self.pair_rank(b[0], b[1]),
            3 => self.three.get(&u24_at(b)).copied().unwrap_or(NONE),
            4 => self.four.get(&u32_at(b)).copied().unwrap_or(NONE),
            5..=7 => self.small.get(&pack_small(b)).copied().unwrap_or(NONE),
            8 => self.eight.get(&u64_at(b)).copied().unwrap_or(NONE),
            9..=15 => self.short.get(&pack(b)).copied().unwrap_or(NONE),
            _ => self.long.get(b).copied().unwrap_or(NONE),
        }
    }

    /// `get` for the merges, whose look-ups of joined parts mostly find no
    /// token: a string of 3 to 8 bytes is first looked for in the filter.
    #[inline(always)]
    pub(crate) fn get_joined(&self, b: &[u8]) -> Rank {
        if (3..=8).contains(&b.len()) {
            let (w, bit) = filter_bit(filter_key(b));
            if self.maybe[w] & bit == 0 {
                return NONE;
            }
        }
        self.get(b)
    }

    /// `get_joined`, below `limit` (see `get_below`).
    #[inline(always)]
    pub(crate) fn get_joined_below(&self, b: &[u8], limit: Rank) -> Rank {
        below(self.get_joined(b), limit)
    }

    /// The rank of the two bytes `a`, `b`, or `NONE` (a table look-up).
    #[inline(always)]
    pub(crate) fn pair_rank(&self, a: u8, b: u8) -> Rank {
        self.pair[(a as usize) << 8 | b as usize]
    }

    /// The rank of `b` if it is below `limit` (merge recovery replays BPE
    /// with only the tokens learnt before a given one), else `NONE`.
    #[inline]
    pub(crate) fn get_below(&self, b: &[u8], limit: Rank) -> Rank {
        below(self.get(b), limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A xorshift generator of test strings, from `seed` (not 0).
    fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// `get` answers as one map of byte strings does, for tokens of every
    /// length (each length range has its own map and key) and for strings
    /// that are not tokens: ones that differ from a token in one byte, or
    /// only by trailing zero bytes (which a key without the length could
    /// confuse).
    #[test]
    fn get_agrees_with_a_byte_string_map() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let mut ranks: FxHashMap<Vec<u8>, Rank> = FxHashMap::default();
        for r in 0..20_000u32 {
            let n = 1 + (next() % 20) as usize;
            // Bytes from a small alphabet with 0 in it, so that strings
            // share prefixes and end in zeros.
            let t: Vec<u8> = (0..n).map(|_| [0u8, b'a', b'b', 0xff][(next() % 4) as usize]).collect();
            ranks.insert(t, r);
        }
        let vocab = Vocab::new(&ranks);
        for (t, &r) in &ranks {
            assert_eq!(vocab.get(t), r, "{t:?}");
            let mut longer = t.clone();
            longer.push(0);
            assert_eq!(vocab.get(&longer), ranks.get(&longer).copied().unwrap_or(NONE), "{longer:?}");
            let mut other = t.clone();
            let i = (next() % t.len() as u64) as usize;
            other[i] ^= b'c';
            assert_eq!(vocab.get(&other), ranks.get(&other).copied().unwrap_or(NONE), "{other:?}");
            assert_eq!(vocab.get(&t[..t.len() - 1]), ranks.get(&t[..t.len() - 1]).copied().unwrap_or(NONE));
        }
    }

    /// The merges' look-up (the filter, then the maps) answers as `get`
    /// does, for every token and for strings of 3 to 8 bytes that are none;
    /// and the filter spares most of those a probe.
    #[test]
    fn get_joined_agrees_with_get() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for _ in 0..60_000 {
            let n = 2 + (next() % 9) as usize;
            tokens.push((0..n).map(|_| (next() % 64) as u8 + b'0').collect());
        }
        let vocab = Vocab::of(&tokens);
        let (mut probes, mut spared) = (0, 0);
        for t in &tokens {
            assert_eq!(vocab.get_joined(t), vocab.get(t), "{t:?}");
        }
        for _ in 0..200_000 {
            let n = 3 + (next() % 6) as usize;
            let s: Vec<u8> = (0..n).map(|_| (next() % 64) as u8 + b'0').collect();
            let r = vocab.get(&s);
            assert_eq!(vocab.get_joined(&s), r, "{s:?}");
            assert_eq!(vocab.get_joined_below(&s, 1000), if r < 1000 { r } else { NONE });
            if r == NONE {
                probes += 1;
                let (w, bit) = filter_bit(filter_key(&s));
                spared += (vocab.maybe[w] & bit == 0) as usize;
            }
        }
        assert!(spared * 10 > probes * 8, "{spared} of {probes} misses spared a probe");
    }

    #[test]
    fn pack_is_injective_and_matches_a_byte_copy() {
        for n in 0..=15usize {
            let b: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(37).wrapping_add(200)).collect();
            let mut a = [0u8; 16];
            a[..n].copy_from_slice(&b);
            a[15] = n as u8;
            assert_eq!(pack(&b), u128::from_le_bytes(a), "length {n}");
            assert_eq!(unpack(pack(&b)), b);
            if (3..=7).contains(&n) {
                assert_eq!(pack_small(&b), pack(&b) as u64 | (n as u64) << 56, "length {n}");
            }
        }
    }
}
