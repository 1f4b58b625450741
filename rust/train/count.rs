//! Counting: every document is pre-tokenized and each distinct chunk counted,
//! from strings in memory or streamed from files (see `train/mod.rs`).

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::long::Long;
use crate::split::pretokenize::{segments, Splitter};
use crate::vocab::{pack, pack_small};

/// Segment size for parallel counting: big enough to amortise scheduling,
/// small enough to keep both cores busy on a few-MB text.
pub(super) const SEGMENT_BYTES: usize = 1 << 20;

/// Distinct chunk bytes -> how often it occurred. Counts are 64-bit: a large
/// corpus overflows 32 bits (a known bug of other trainers).
///
/// Laid out for counting speed and memory: chunks of up to 15 bytes (nearly
/// all of them) are packed into 16 bytes (see `encode::pack`), so counting
/// one costs a multiply-hash and one probe with the key inline, and no
/// allocation when it is new; longer chunks are stored in blocks with an
/// index over them (`long.rs`). The key
/// is two `u64` halves, not a `u128`, whose alignment to 16 would pad each
/// bucket from 24 to 32 bytes. Chunks of up to 7 bytes (most English words
/// with their space) have a map of their own with a `u64` key: 16 bytes a
/// bucket. The merge loop reads this layout directly, with no conversion.
/// (Measurements: docs/dev/performance.md, "Chunk counts".)
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChunkCounts {
    tiny: FxHashMap<u64, u64>,
    short: FxHashMap<Packed, u64>,
    long: Long,
}

/// Packs up to 7 bytes into a u64: the bytes little-endian, the length in
/// the top byte (so "ab\0" and "ab" differ). The encoder's `pack_small`
/// layout, extended to 0..=2 bytes.
#[inline]
fn pack_tiny(b: &[u8]) -> u64 {
    let n = b.len();
    debug_assert!(n <= 7);
    if n >= 3 {
        return pack_small(b);
    }
    b.iter().rev().fold(0u64, |acc, &x| acc << 8 | x as u64) | (n as u64) << 56
}

/// The bytes of a tiny chunk: its 8 bytes, of which the first `bytes[7]` count.
fn tiny_bytes(key: u64) -> [u8; 8] {
    key.to_le_bytes()
}

/// A chunk of up to 15 bytes as `encode::pack` packs it, in (low, high) halves.
type Packed = (u64, u64);
// The layout the comment above promises.
const _: () = assert!(std::mem::size_of::<(Packed, u64)>() == 24);

fn split(key: u128) -> Packed {
    (key as u64, (key >> 64) as u64)
}

/// The bytes of a packed chunk: its 16 bytes, of which the first `bytes[15]` count.
fn packed_bytes((lo, hi): Packed) -> [u8; 16] {
    (u128::from(lo) | u128::from(hi) << 64).to_le_bytes()
}

impl ChunkCounts {
    /// Adds `n` occurrences of `chunk`.
    pub fn add(&mut self, chunk: &[u8], n: u64) {
        if chunk.len() <= 7 {
            *self.tiny.entry(pack_tiny(chunk)).or_insert(0) += n;
        } else if chunk.len() <= 15 {
            *self.short.entry(split(pack(chunk))).or_insert(0) += n;
        } else {
            self.long.add(chunk, n);
        }
    }

    /// The number of distinct chunks.
    pub fn len(&self) -> usize {
        self.tiny.len() + self.short.len() + self.long.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// About how many bytes the maps hold: their buckets, used or not, and
    /// the long chunks' blocks and index. For `spill.rs`'s cap.
    pub fn memory_bytes(&self) -> usize {
        // A table of capacity c has about c * 8 / 7 buckets, each an entry
        // and a control byte.
        fn table<K, V>(m: &FxHashMap<K, V>) -> usize {
            m.capacity() * 8 / 7 * (std::mem::size_of::<(K, V)>() + 1)
        }
        table(&self.tiny) + table(&self.short) + self.long.memory_bytes()
    }

    /// Calls `f` with each chunk of up to 15 bytes and its count (in no
    /// set order); the longer ones are in [`ChunkCounts::long`].
    pub(super) fn for_each_packed(&self, mut f: impl FnMut(&[u8], u64)) {
        for (&k, &n) in &self.tiny {
            let bytes = tiny_bytes(k);
            f(&bytes[..bytes[7] as usize], n);
        }
        for (&k, &n) in &self.short {
            let bytes = packed_bytes(k);
            f(&bytes[..bytes[15] as usize], n);
        }
    }

    /// The chunks of 16 bytes or more.
    pub(super) fn long(&self) -> &Long {
        &self.long
    }

    /// Keeps only the chunks counted at least `min` times.
    pub fn retain_at_least(&mut self, min: u64) {
        self.tiny.retain(|_, n| *n >= min);
        self.short.retain(|_, n| *n >= min);
        self.long.retain_at_least(min);
    }

    /// Calls `f` with each distinct chunk and its count (in no set order).
    pub fn for_each(&self, mut f: impl FnMut(&[u8], u64)) {
        self.for_each_packed(&mut f);
        self.long.for_each(f);
    }

    /// The counts in two parts, consumed: those of chunks of up to 15 bytes,
    /// and the blocks of records of the longer ones (`long::records`), which
    /// `drain` gives after the others, in the same order.
    pub(super) fn split_long(mut self) -> (ChunkCounts, Vec<Vec<u8>>) {
        let long = std::mem::take(&mut self.long);
        (self, long.into_blocks())
    }

    /// The counts, consumed (each map is freed as soon as it is read).
    pub(super) fn drain(self, mut f: impl FnMut(&[u8], u64)) {
        for (k, n) in self.tiny {
            let bytes = tiny_bytes(k);
            f(&bytes[..bytes[7] as usize], n);
        }
        for (k, n) in self.short {
            let bytes = packed_bytes(k);
            f(&bytes[..bytes[15] as usize], n);
        }
        self.long.drain(f);
    }
}

/// What a [`Source`] calls with each chunk and its count; an error stops it.
pub type Visit<'a> = dyn FnMut(&[u8], u64) -> Result<(), String> + 'a;

/// Chunk counts to train on, handed over once: the counts in memory, or
/// the runs a capped counting spilled to disk merged as they are read
/// (`spill.rs`), which never holds them all in memory at once.
pub trait Source {
    /// Upper bounds on the number of chunks of two bytes or more (a chunk
    /// counted more than `u32::MAX` times as several) and on their bytes:
    /// the room the words are made with.
    fn bound(&self) -> (usize, usize);

    /// Calls `f` with each distinct chunk and its whole count, in no set
    /// order, consuming the counts; stops at the first error from `f`
    /// (Ctrl-C: the rest of the runs on disk are not read), or of reading.
    fn drain_into(self, f: &mut Visit<'_>) -> Result<(), String>;

    /// The counts as a map in memory, which can be read on all threads
    /// (`Words::of_keys`), if they are one; else `Err(self)`, to be drained.
    fn in_memory(self) -> Result<ChunkCounts, Self>
    where
        Self: Sized,
    {
        Err(self)
    }
}

/// Adds to `bound` ([`Source::bound`]) a chunk of `len` bytes counted `freq` times.
pub(super) fn add_bound(bound: &mut (usize, usize), len: usize, freq: u64) {
    if len >= 2 {
        let words = super::words::pieces(freq);
        bound.0 += words;
        bound.1 += len * words;
    }
}

impl Source for ChunkCounts {
    fn bound(&self) -> (usize, usize) {
        let mut bound = (0, 0);
        self.for_each(|b, freq| add_bound(&mut bound, b.len(), freq));
        bound
    }

    fn drain_into(self, f: &mut Visit<'_>) -> Result<(), String> {
        // (In memory, the rest is only freed after an error.)
        let mut result = Ok(());
        self.drain(|chunk, n| {
            if result.is_ok() {
                result = f(chunk, n);
            }
        });
        result
    }

    fn in_memory(self) -> Result<ChunkCounts, Self> {
        Ok(self)
    }
}

impl FromIterator<(Vec<u8>, u64)> for ChunkCounts {
    fn from_iter<I: IntoIterator<Item = (Vec<u8>, u64)>>(items: I) -> Self {
        let mut counts = ChunkCounts::default();
        for (k, n) in items {
            counts.add(&k, n);
        }
        counts
    }
}

/// A counting thread adds its own map to the shared total after counting
/// this much text (and once more at the end), then counts on into the same
/// map, emptied: the memory of counting stays the total plus one map of at
/// most this much text's distinct chunks per thread, and the total's lock
/// is taken rarely.
pub(super) const FLUSH_BYTES: usize = 8 << 20;

/// Where the counting threads add their maps (see `count_files_into`): a
/// plain total, or one that moves its counts to disk past a memory cap
/// (`spill.rs`).
pub trait Tally: Send {
    /// Adds `counts` to the tally, leaving `counts` empty but with its
    /// room: a counting thread fills the same pages again. (A fresh map
    /// per flush grew by doubling into fresh pages each time, and training
    /// gives freed memory back at once: 1 GB of text cost ~290k page faults,
    /// ~0.8 s of kernel time of the counting's ~7 CPU-s; docs/dev/performance.md,
    /// "Reading records".)
    fn absorb(&mut self, counts: &mut ChunkCounts) -> Result<(), String>;

    /// How much text a counting thread counts into its own map before
    /// handing that map to `absorb`.
    fn flush_bytes(&self) -> usize {
        FLUSH_BYTES
    }
}

impl Tally for ChunkCounts {
    fn absorb(&mut self, counts: &mut ChunkCounts) -> Result<(), String> {
        self.drain_from(counts);
        Ok(())
    }
}

impl ChunkCounts {
    /// Moves `other`'s counts into these (see [`drain_map`]).
    fn drain_from(&mut self, other: &mut ChunkCounts) {
        drain_map(&mut self.tiny, &mut other.tiny);
        drain_map(&mut self.short, &mut other.short);
        self.long.absorb(&mut other.long);
    }
}

/// What counting cuts a text into, and what it keys each chunk by: a split
/// pattern's chunks by their bytes (a [`Splitter`]), or SuperBPE's
/// second-stage chunks by the ids its first stage encodes them to
/// (`ids.rs`). Every way in (texts, files, records, Arrow) counts through
/// one of these.
pub trait Chunker: Sync {
    /// Whether a long text may be cut at the split pattern's safe points
    /// and its pieces counted apart (see `Splitter::cuttable`).
    fn cuttable(&self) -> bool;

    /// Counts the chunks of one document into `counts`.
    fn count(&self, text: &str, counts: &mut ChunkCounts) -> Result<(), String>;
}

impl Chunker for Splitter {
    fn cuttable(&self) -> bool {
        Splitter::cuttable(self)
    }

    fn count(&self, text: &str, counts: &mut ChunkCounts) -> Result<(), String> {
        self.for_each_chunk(text, |chunk| counts.add(chunk.as_bytes(), 1))
    }
}

/// Counts the chunks of one document into `counts` (single thread).
pub fn count_chunks(chunker: &dyn Chunker, text: &str, counts: &mut ChunkCounts) -> Result<(), String> {
    chunker.count(text, counts)
}

/// The sum of two counts (iterating the smaller maps).
pub fn merge_counts(mut into: ChunkCounts, mut other: ChunkCounts) -> ChunkCounts {
    into.drain_from(&mut other);
    into
}

/// Moves `from`'s counts into `into`, iterating the smaller of the two (they
/// swap first when `from` is larger), and leaves `from` empty with the room
/// of whichever map it holds then.
fn drain_map<K: Eq + std::hash::Hash>(into: &mut FxHashMap<K, u64>, from: &mut FxHashMap<K, u64>) {
    if from.len() > into.len() {
        std::mem::swap(into, from);
    }
    for (k, v) in from.drain() {
        *into.entry(k).or_insert(0) += v;
    }
}

/// Counts the chunks of many documents, in parallel over the threads of
/// this process's pool (`threads::install`).
/// Long documents are cut at safe points when the pattern allows it.
pub fn count_documents(splitter: &dyn Chunker, docs: &[&str]) -> Result<ChunkCounts, String> {
    let mut pieces: Vec<&str> = Vec::new();
    for doc in docs {
        if splitter.cuttable() && doc.len() > SEGMENT_BYTES {
            pieces.extend(segments(doc, SEGMENT_BYTES));
        } else {
            pieces.push(doc);
        }
    }
    crate::threads::install(|| {
        pieces
            .par_iter()
            .try_fold(ChunkCounts::default, |mut acc, piece| {
                splitter.count(piece, &mut acc)?;
                Ok(acc)
            })
            .try_reduce(ChunkCounts::default, |a, b| Ok(merge_counts(a, b)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::patterns::GPT4_PATTERN;

    #[test]
    fn packed_tally_counts_like_a_plain_map() {
        // Chunks of every length around the packing limits of 7 and 15
        // bytes (with their space: " abcdef" is 7), the empty-looking ones
        // ("\0"), and multi-byte characters.
        let words = [
            "a",
            "\0",
            "\0\0",
            "ab",
            "abc",
            "abcdef",
            "abcdefg",
            "日本",
            &"\0".repeat(7),
            "x".repeat(15).as_str(),
            &"y".repeat(16),
            "é",
            &"日".repeat(5),
            &"日".repeat(6),
        ]
        .map(String::from);
        let text: String =
            (0..3000).map(|i| words[(i * 7 + i / 3) % words.len()].as_str()).collect::<Vec<_>>().join(" ");
        let splitter = Splitter::new(GPT4_PATTERN).unwrap();
        let mut plain: FxHashMap<Vec<u8>, u64> = FxHashMap::default();
        splitter.for_each_chunk(&text, |c| *plain.entry(c.as_bytes().to_vec()).or_insert(0) += 2).unwrap();
        let mut packed: FxHashMap<Vec<u8>, u64> = FxHashMap::default();
        count_documents(&splitter, &[&text, &text]).unwrap().for_each(|c, n| {
            assert!(packed.insert(c.to_vec(), n).is_none(), "{c:?} twice");
        });
        assert_eq!(packed, plain);
    }
    #[test]
    fn parallel_counting_equals_sequential() {
        let s = Splitter::new(GPT4_PATTERN).unwrap();
        let text = "The quick brown fox.\nJumps over 1234 lazy dogs!\n".repeat(50_000);
        let mut seq = ChunkCounts::default();
        count_chunks(&s, &text, &mut seq).unwrap();
        let par = count_documents(&s, &[&text]).unwrap();
        assert_eq!(seq, par);
    }

    #[test]
    fn absorbing_adds_the_counts_and_leaves_the_room() {
        // Maps of 1 to 15+ byte chunks, smaller and larger than the total by
        // turns (so both sides of `drain_map`'s swap run), each absorbed and
        // then refilled as a counting thread refills its own.
        let s = Splitter::new(GPT4_PATTERN).unwrap();
        let texts: Vec<String> = (0..12)
            .map(|k| {
                let words = if k % 3 == 0 { 4000 } else { 40 };
                (0..words)
                    .map(|i| format!("w{} x{}yz{}", i % (k + 7), i * k, "q".repeat(i % 19)))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        let (mut total, mut expected) = (ChunkCounts::default(), ChunkCounts::default());
        let mut thread = ChunkCounts::default();
        for text in &texts {
            count_chunks(&s, text, &mut thread).unwrap();
            let mut counted = ChunkCounts::default();
            count_chunks(&s, text, &mut counted).unwrap();
            expected = merge_counts(expected, counted);
            total.absorb(&mut thread).unwrap();
            assert!(thread.is_empty());
            assert_eq!(total, expected);
        }
        // The emptied map keeps a table's room (one of the two swapped in).
        assert!(thread.tiny.capacity() > 0 && thread.short.capacity() > 0 && thread.long.capacity() > 0);
    }
}
