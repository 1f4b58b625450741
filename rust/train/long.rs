//! The counts of long chunks (16 bytes or more): each chunk's bytes stored
//! once, in large blocks, with a hash index over them.
//!
//! Why not a map keyed by `Vec<u8>`: that costs a heap allocation per
//! distinct chunk (rounded up by the allocator) and a 24-byte key in each
//! bucket, and its memory cannot be counted without walking it. That
//! mattered little while long chunks were rare (ordinary patterns: URLs,
//! long numbers), but SuperBPE's second stage counts chunks that run over
//! several words: on 1 GB of English, 4.7M distinct chunks of 200 bytes on
//! average, nearly the whole text. There, a key per allocation held 1.3 GB
//! where the estimate said 0.5 GB, so a memory cap did not hold; and the
//! keys, freed in hash order when training consumed the counts, gave their
//! pages back only at the end (docs/dev/superbpe.md, "Memory of stage 2").
//!
//! Here a chunk is a record `[count: u64][length: u64][bytes]` appended to
//! the current block (`BLOCK` bytes; a longer chunk gets a block of its
//! own), and the index holds `(hash, place)` pairs, 16 bytes each: its size
//! is known exactly, it grows without touching the blocks (the hash is
//! kept), and [`Long::drain`] reads the blocks in order, freeing each as it
//! is read.

use hashbrown::HashTable;
use std::hash::BuildHasher;

/// Bytes per block: large enough that the index and the allocator see few
/// of them, small enough that a thread's map (a few MB) wastes little.
const BLOCK: usize = 1 << 20;
/// A record's header: its count and its length, each a `u64`, little-endian.
const HEADER: usize = 16;

/// A chunk's place in the index: its hash (kept, so that growing the index
/// reads no block) and where its record starts (block << 32 | offset).
#[derive(Clone, Copy)]
struct Slot {
    hash: u64,
    at: u64,
}

/// Long chunks and their counts (see the module comment).
#[derive(Clone, Default)]
pub(super) struct Long {
    /// Records, in the order they were first added; blocks past `current`
    /// are empty (kept from before a [`Long::clear`], to be filled again).
    blocks: Vec<Vec<u8>>,
    current: usize,
    index: HashTable<Slot>,
}

fn hash(chunk: &[u8]) -> u64 {
    rustc_hash::FxBuildHasher.hash_one(chunk)
}

fn place(at: u64) -> (usize, usize) {
    ((at >> 32) as usize, (at & 0xffff_ffff) as usize)
}

/// The count and bytes of the record at `offset` of `block`, and the offset after it.
fn record(block: &[u8], offset: usize) -> (u64, &[u8], usize) {
    let word = |at: usize| u64::from_le_bytes(block[at..at + 8].try_into().expect("8 bytes"));
    let (count, len) = (word(offset), word(offset + 8) as usize);
    let start = offset + HEADER;
    (count, &block[start..start + len], start + len)
}

/// Calls `f` with each chunk of `block` (of [`Long::into_blocks`]) and its
/// count, in order.
pub(super) fn records(block: &[u8], mut f: impl FnMut(&[u8], u64)) {
    let mut offset = 0;
    while offset < block.len() {
        let (count, chunk, next) = record(block, offset);
        f(chunk, count);
        offset = next;
    }
}

impl Long {
    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    /// The bytes held: the blocks (their whole room) and the index.
    pub(super) fn memory_bytes(&self) -> usize {
        self.blocks.iter().map(Vec::capacity).sum::<usize>() + self.index.allocation_size()
    }

    /// Room in the index, for tests (a cleared map keeps it).
    #[cfg(test)]
    pub(super) fn capacity(&self) -> usize {
        self.index.capacity()
    }

    fn find(&self, hash: u64, chunk: &[u8]) -> Option<u64> {
        let blocks = &self.blocks;
        let same = |s: &Slot| {
            let (b, o) = place(s.at);
            s.hash == hash && record(&blocks[b], o).1 == chunk
        };
        self.index.find(hash, same).map(|s| s.at)
    }

    /// Adds `n` occurrences of `chunk`.
    pub(super) fn add(&mut self, chunk: &[u8], n: u64) {
        let h = hash(chunk);
        match self.find(h, chunk) {
            Some(at) => {
                let (b, o) = place(at);
                let count = &mut self.blocks[b][o..o + 8];
                let sum = u64::from_le_bytes((&*count).try_into().expect("8 bytes")) + n;
                count.copy_from_slice(&sum.to_le_bytes());
            }
            None => {
                let at = self.append(chunk, n);
                self.index.insert_unique(h, Slot { hash: h, at }, |s| s.hash);
            }
        }
    }

    /// Appends a record; returns its place.
    fn append(&mut self, chunk: &[u8], n: u64) -> u64 {
        let size = HEADER + chunk.len();
        if self.blocks.is_empty() {
            self.blocks.push(Vec::new());
        }
        let fits = |b: &Vec<u8>| b.capacity() - b.len() >= size;
        if !fits(&self.blocks[self.current]) {
            if !self.blocks[self.current].is_empty() {
                self.current += 1;
            }
            if self.current == self.blocks.len() {
                self.blocks.push(Vec::new());
            }
            let block = &mut self.blocks[self.current];
            if !fits(block) {
                // Empty here: a fresh block, or one kept by `clear` too small for this chunk.
                *block = Vec::with_capacity(size.max(BLOCK));
            }
        }
        let (b, block) = (self.current, &mut self.blocks[self.current]);
        let offset = block.len();
        block.extend_from_slice(&n.to_le_bytes());
        block.extend_from_slice(&(chunk.len() as u64).to_le_bytes());
        block.extend_from_slice(chunk);
        (b as u64) << 32 | offset as u64
    }

    /// Calls `f` with each chunk and its count, in the order they were first added.
    pub(super) fn for_each(&self, mut f: impl FnMut(&[u8], u64)) {
        for block in &self.blocks {
            records(block, &mut f);
        }
    }

    /// [`Long::for_each`], consuming: the index is freed first, then each
    /// block once it is read.
    pub(super) fn drain(self, mut f: impl FnMut(&[u8], u64)) {
        for block in self.into_blocks() {
            records(&block, &mut f);
        }
    }

    /// The blocks of records, in order (read each with [`records`]), the
    /// index freed.
    pub(super) fn into_blocks(self) -> Vec<Vec<u8>> {
        let mut blocks = self.blocks;
        blocks.truncate(self.current + 1);
        blocks
    }

    /// Empties the map, keeping its room (the index's and the blocks').
    pub(super) fn clear(&mut self) {
        self.index.clear();
        self.blocks.iter_mut().for_each(Vec::clear);
        self.current = 0;
    }

    /// Moves `from`'s counts into these, reading the smaller of the two
    /// (they swap first when `from` is larger), and leaves `from` empty with
    /// the room of whichever map it holds then.
    pub(super) fn absorb(&mut self, from: &mut Long) {
        if from.len() > self.len() {
            std::mem::swap(self, from);
        }
        from.for_each(|chunk, n| self.add(chunk, n));
        from.clear();
    }

    /// Keeps only the chunks counted at least `min` times (copied into fresh
    /// blocks, the old ones freed as they are read).
    pub(super) fn retain_at_least(&mut self, min: u64) {
        let mut kept = Long::default();
        std::mem::take(self).drain(|chunk, n| {
            if n >= min {
                kept.add(chunk, n)
            }
        });
        *self = kept;
    }

    /// Asks the CPU for the start of the record at `at` (its count, length
    /// and first 48 bytes), ahead of an `at` of it.
    #[inline]
    pub(super) fn prefetch(&self, at: u64) {
        let (b, o) = place(at);
        super::merging::prefetch(&self.blocks[b][o]);
    }

    /// The chunk and count at `at`, a place from [`Long::sorted`].
    pub(super) fn at(&self, at: u64) -> (&[u8], u64) {
        let (b, o) = place(at);
        let (count, chunk, _) = record(&self.blocks[b], o);
        (chunk, count)
    }

    /// The places of the chunks counted at least `min` times, in the byte
    /// order of the chunks, for writing a count table (`spill.rs`). Sorted
    /// on all threads by their first 24 bytes (every long chunk has 16; a
    /// shorter one's are padded with zeros, which orders it as the bytes
    /// do, or ties), read from the blocks only where those are equal:
    /// comparing chunks in the blocks, scattered over a gigabyte, was most
    /// of a spill's time, and with 16 bytes a tenth of a stage-2 counting's
    /// (sentences that start alike).
    pub(super) fn sorted(&self, min: u64) -> Vec<u64> {
        use rayon::prelude::*;
        // (The same 32 bytes an entry takes with 16 bytes of key.)
        let mut keys: Vec<(u128, u64, u64)> = Vec::with_capacity(self.len());
        for (b, block) in self.blocks.iter().enumerate() {
            let mut offset = 0;
            while offset < block.len() {
                let (count, chunk, next) = record(block, offset);
                if count >= min {
                    let first = u128::from_be_bytes(chunk[..16].try_into().expect("16 bytes or more"));
                    let mut then = [0u8; 8];
                    let more = &chunk[16..chunk.len().min(24)];
                    then[..more.len()].copy_from_slice(more);
                    keys.push((first, u64::from_be_bytes(then), (b as u64) << 32 | offset as u64));
                }
                offset = next;
            }
        }
        let rest = |at: u64| &self.at(at).0[16..];
        crate::threads::install(|| {
            keys.par_sort_unstable_by(|x, y| (x.0, x.1).cmp(&(y.0, y.1)).then_with(|| rest(x.2).cmp(rest(y.2))));
        });
        keys.into_iter().map(|(_, _, at)| at).collect()
    }

    pub(super) fn get(&self, chunk: &[u8]) -> Option<u64> {
        let (b, o) = place(self.find(hash(chunk), chunk)?);
        Some(record(&self.blocks[b], o).0)
    }
}

/// Equal when they hold the same chunks with the same counts (in any order).
impl PartialEq for Long {
    fn eq(&self, other: &Long) -> bool {
        let mut same = self.len() == other.len();
        self.for_each(|chunk, n| same &= other.get(chunk) == Some(n));
        same
    }
}

impl std::fmt::Debug for Long {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut map = f.debug_map();
        self.for_each(|chunk, n| {
            map.entry(&String::from_utf8_lossy(chunk), &n);
        });
        map.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Chunks of many lengths, some longer than a block, added in an order
    /// with repeats: the same counts as a plain map, through clear, absorb,
    /// retain and drain; first-added order kept.
    #[test]
    fn counts_like_a_plain_map() {
        let chunk = |i: usize| -> Vec<u8> {
            let len = 16 + (i * 7919) % 300 + if i % 97 == 0 { BLOCK } else { 0 };
            (0..len).map(|k| (i * 31 + k * (i % 7 + 1)) as u8).collect()
        };
        let mut plain: HashMap<Vec<u8>, u64> = HashMap::new();
        let mut long = Long::default();
        let mut first = Vec::new();
        for step in 0..20_000usize {
            let i = (step * 2654435761) % 5000;
            let c = chunk(i);
            if !plain.contains_key(&c) {
                first.push(c.clone());
            }
            *plain.entry(c.clone()).or_default() += step as u64 % 5 + 1;
            long.add(&c, step as u64 % 5 + 1);
        }
        let mut seen = Vec::new();
        long.for_each(|c, n| {
            assert_eq!(plain[c], n);
            seen.push(c.to_vec());
        });
        assert_eq!(seen, first, "first-added order");
        assert_eq!(long.len(), plain.len());
        // Absorbing into a larger map, and into a smaller one (they swap);
        // the emptied map takes chunks again.
        for half in [0, 1] {
            let mut part = Long::default();
            for (k, c) in first.iter().enumerate().filter(|(k, _)| k % 2 == half) {
                part.add(c, k as u64);
                *plain.get_mut(c).unwrap() += k as u64;
            }
            if half == 0 {
                long.absorb(&mut part);
            } else {
                part.absorb(&mut long);
                std::mem::swap(&mut part, &mut long);
            }
            assert_eq!(part.len(), 0);
            part.add(&first[0], 1);
            assert_eq!(part.get(&first[0]), Some(1));
        }
        for (c, &n) in &plain {
            assert_eq!(long.get(c), Some(n));
        }
        long.retain_at_least(40);
        plain.retain(|_, n| *n >= 40);
        assert_eq!(long.len(), plain.len());
        let order: Vec<&[u8]> = long.sorted(50).into_iter().map(|at| long.at(at).0).collect();
        let mut want: Vec<&[u8]> = plain.iter().filter(|(_, &n)| n >= 50).map(|(c, _)| &c[..]).collect();
        want.sort();
        assert_eq!(order, want);
        let mut drained = HashMap::new();
        long.clone().drain(|c, n| assert!(drained.insert(c.to_vec(), n).is_none()));
        assert_eq!(drained, plain);
        assert!(long.memory_bytes() >= plain.keys().map(|c| c.len() + HEADER).sum::<usize>());
    }
}
