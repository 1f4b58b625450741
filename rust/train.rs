//! Training: learn a merge list from a corpus.
//!
//! Two phases, both here:
//!
//! 1. **Counting.** Every document is pre-tokenized (see `pretokenize.rs`) and
//!    each distinct chunk is counted. Only the counts are kept, so memory grows
//!    with the number of *distinct* chunks, never with the corpus size. Texts
//!    are cut at safe points into segments that all cores count in parallel,
//!    each into its own map, and the maps are summed at the end (a shared map
//!    behind a lock would serialise the cores).
//!
//! 2. **Merging.** Each distinct chunk becomes a "word": its list of token ids,
//!    starting from its bytes, weighted by its count. We keep the count of every
//!    adjacent pair over all words and, per pair, the words it occurs in. Each
//!    step takes the most frequent pair from a priority queue, rewrites only the
//!    words that contain it and adjusts the pair counts by the difference. A
//!    full recount per merge (minbpe's way, our Python reference) would be
//!    O(corpus) per merge; this is O(affected words). Only the pairs near
//!    the top are kept exactly, in a hash map and the queue; the many others,
//!    which can only lose occurrences, wait "cold" with a bound on their
//!    count and are recounted when the top comes down to them.
//!
//! **Tie-break (deterministic):** the most frequent pair wins; among equal
//! counts, the pair whose `(left token bytes, right token bytes)` is
//! lexicographically smallest. Nothing depends on hash order or thread count,
//! so the same corpus gives the same merges on any machine.
//!
//! **Duplicates:** rarely, two different pairs concatenate to the same bytes
//! (the same string reached by two merge paths). The later merge then reuses
//! the existing id instead of adding a second token with the same bytes, so
//! `vocab` stays a bijection (which tiktoken's rank files require).

use std::sync::Arc;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::vocab::{pack, pack_small};
use crate::pretokenize::{last_safe_cut, segments, Splitter};

/// Segment size for parallel counting: big enough to amortise scheduling,
/// small enough to keep both cores busy on a few-MB text.
const SEGMENT_BYTES: usize = 1 << 20;

/// Distinct chunk bytes -> how often it occurred. Counts are 64-bit: a large
/// corpus overflows 32 bits (a known bug of other trainers).
///
/// Laid out for counting speed and memory: chunks of up to 15 bytes (nearly
/// all of them) are packed into 16 bytes (see `encode::pack`), so counting
/// one costs a multiply-hash and one probe with the key inline, and no
/// allocation when it is new; longer chunks keep a byte-string key. This
/// made counting ~25% faster than one `Vec<u8>`-keyed map and holds a
/// distinct short chunk in 25 bytes instead of ~70. The key is two `u64`
/// halves, not a `u128`: a `u128` is aligned to 16, which padded each bucket
/// (key and count) from 24 to 32 bytes, and this map is the peak of counting
/// on corpora with millions of distinct chunks. The merge loop reads this
/// layout directly: converting it to a `Vec<u8>`-keyed map first doubled the
/// counts' memory at the hand-over and left the allocator fragmented (56 MB
/// of 734k small freed keys on FLORES-200).
///
/// Chunks of up to 7 bytes (most English words with their space) have a map
/// of their own with a `u64` key: 16 bytes a bucket, not 24. On the
/// benchmark's 1 GB scale file this made the counts smaller (and each map's
/// doubling, old and new table at once, a smaller spike): peak of counting
/// 107.8 -> 86.2 MB (`examples/profile`); the hand-over to the merge loop
/// (counts and words at once), a peak of 109.4 MB, is now below that.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChunkCounts {
    tiny: FxHashMap<u64, u64>,
    short: FxHashMap<Packed, u64>,
    long: FxHashMap<Vec<u8>, u64>,
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
        } else if let Some(c) = self.long.get_mut(chunk) {
            // Looked up by slice first: a key is allocated only for new chunks.
            *c += n;
        } else {
            self.long.insert(chunk.to_vec(), n);
        }
    }

    /// The number of distinct chunks.
    pub fn len(&self) -> usize {
        self.tiny.len() + self.short.len() + self.long.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Calls `f` with each distinct chunk and its count (in no set order).
    pub fn for_each(&self, mut f: impl FnMut(&[u8], u64)) {
        for (&k, &n) in &self.tiny {
            let bytes = tiny_bytes(k);
            f(&bytes[..bytes[7] as usize], n);
        }
        for (&k, &n) in &self.short {
            let bytes = packed_bytes(k);
            f(&bytes[..bytes[15] as usize], n);
        }
        for (k, &n) in &self.long {
            f(k, n);
        }
    }

    /// The counts, consumed (each map is freed as soon as it is read).
    fn drain(self, mut f: impl FnMut(&[u8], u64)) {
        for (k, n) in self.tiny {
            let bytes = tiny_bytes(k);
            f(&bytes[..bytes[7] as usize], n);
        }
        for (k, n) in self.short {
            let bytes = packed_bytes(k);
            f(&bytes[..bytes[15] as usize], n);
        }
        for (k, n) in self.long {
            f(&k, n);
        }
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

/// Counts the chunks of one document into `counts` (single thread).
pub fn count_chunks(splitter: &Splitter, text: &str, counts: &mut ChunkCounts) -> Result<(), String> {
    splitter.for_each_chunk(text, |chunk| counts.add(chunk.as_bytes(), 1))
}

/// The sum of two counts (iterating the smaller maps).
pub fn merge_counts(mut into: ChunkCounts, other: ChunkCounts) -> ChunkCounts {
    add_map(&mut into.tiny, other.tiny);
    add_map(&mut into.short, other.short);
    add_map(&mut into.long, other.long);
    into
}

/// Adds `other`'s counts to `into`'s, iterating the smaller of the two.
fn add_map<K: Eq + std::hash::Hash>(into: &mut FxHashMap<K, u64>, mut other: FxHashMap<K, u64>) {
    if other.len() > into.len() {
        std::mem::swap(into, &mut other);
    }
    for (k, v) in other {
        *into.entry(k).or_insert(0) += v;
    }
}

/// Counts the chunks of many documents, in parallel over all rayon threads.
/// Long documents are cut at safe points when the pattern allows it.
pub fn count_documents(splitter: &Splitter, docs: &[&str]) -> Result<ChunkCounts, String> {
    let mut pieces: Vec<&str> = Vec::new();
    for doc in docs {
        if splitter.cuttable() && doc.len() > SEGMENT_BYTES {
            pieces.extend(segments(doc, SEGMENT_BYTES));
        } else {
            pieces.push(doc);
        }
    }
    pieces
        .par_iter()
        .try_fold(ChunkCounts::default, |mut acc, piece| {
            splitter.for_each_chunk(piece, |chunk| acc.add(chunk.as_bytes(), 1))?;
            Ok(acc)
        })
        .try_reduce(ChunkCounts::default, |a, b| Ok(merge_counts(a, b)))
}

/// How many bytes of a file are read at a time: each read is cut back to its
/// last safe cut point, the rest carried into the next, and the piece before
/// the cut is one segment for a counting thread.
const READ_BYTES: usize = SEGMENT_BYTES;

/// A counting thread adds its own map to the shared total after counting
/// this much text (and once more at the end), then starts a fresh map: the
/// memory of counting stays the total plus one map of at most this much
/// text's distinct chunks per thread, and the total's lock is taken rarely.
const FLUSH_BYTES: usize = 8 << 20;

/// Streams UTF-8 text files and counts their chunks. `on_bytes` gets the
/// number of bytes read after each segment and may stop the work by
/// returning an error (Ctrl-C).
///
/// Each file is one document, read in segments cut at safe cut points (see
/// `pretokenize.rs`): exact for the built-in patterns; a custom pattern whose
/// matches cross "\n" followed by a letter or digit is cut there.
///
/// A pipeline: this thread reads and checks UTF-8 while one counting thread
/// per core (as many as rayon's pool has) lexes and counts the segments it
/// hands them through a short queue. Memory: a few segments in flight plus
/// the counts. It replaced reading 8 MB blocks and counting each with rayon
/// in turn, which left the cores idle while a block was read (5-6 ms each:
/// a fresh buffer's page faults and zeroing), while each block's per-split
/// maps were summed (~4 ms at the end of each block) and on the block's last
/// uneven segments. Counting took (`examples/profile train`, same counts):
/// 10 MB of English 43-51 -> 30-35 ms, 100 MB 470 -> 292 ms, FLORES-200
/// 235 -> 142 ms, the 1 GB scale file 4.87 -> 3.38 s; the peak while
/// counting 10 MB fell from 28 to 15 MB (no 8 MB block, reallocated to 16 MB
/// when the carry did not fit).
pub fn count_files(
    splitter: &Splitter,
    paths: &[std::path::PathBuf],
    on_bytes: impl FnMut(u64) -> Result<(), String>,
) -> Result<ChunkCounts, String> {
    let count = |text: &str, counts: &mut ChunkCounts| count_chunks(splitter, text, counts);
    count_files_in(&count, paths, (READ_BYTES, FLUSH_BYTES), on_bytes)
}

/// What counts one segment into a map (tests pass one that fails).
type CountFn<'a> = &'a (dyn Fn(&str, &mut ChunkCounts) -> Result<(), String> + Sync);

/// `count_files` with `count` for each segment, reading `sizes.0` bytes at a
/// time, each counting thread adding to the total every `sizes.1` bytes
/// (tests use tiny sizes).
fn count_files_in(
    count: CountFn,
    paths: &[std::path::PathBuf],
    (read_bytes, flush_bytes): (usize, usize),
    on_bytes: impl FnMut(u64) -> Result<(), String>,
) -> Result<ChunkCounts, String> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{mpsc, Mutex};

    let threads = rayon::current_num_threads().max(1);
    let total = Mutex::new(ChunkCounts::default());
    // The number of the first segment known to have failed (none: MAX).
    let failed = AtomicUsize::new(usize::MAX);
    // Segments to count, and their buffers back for reuse (no fresh pages).
    let (to_count, segments) = mpsc::sync_channel::<(usize, String)>(threads);
    let segments = Mutex::new(segments);
    let (give_back, spare) = mpsc::channel::<String>();

    let (read, counted) = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let give_back = give_back.clone();
                let (segments, total, failed) = (&segments, &total, &failed);
                scope.spawn(move || count_segments(count, segments, give_back, total, failed, flush_bytes))
            })
            .collect();
        drop(give_back);
        let read = read_segments(paths, read_bytes, &spare, &failed, on_bytes, |segment| {
            // Cannot fail: the queue's receiver lives until the scope ends.
            to_count.send(segment).map_err(|_| "the counting threads are gone".to_string())
        });
        if read.is_err() {
            failed.store(0, Ordering::Relaxed); // the rest is not counted
        }
        drop(to_count); // the counting threads finish the queue and return
        let counted: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
        (read, counted)
    });
    // The first failure in file order: a counting thread's (on an earlier
    // segment than the reader's position), else the reader's.
    let mut first: Option<(usize, String)> = None;
    for result in counted {
        match result {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(Err((i, e))) if first.as_ref().is_none_or(|(j, _)| i < *j) => first = Some((i, e)),
            Ok(_) => {}
        }
    }
    if let Some((_, e)) = first {
        return Err(e);
    }
    read?;
    Ok(total.into_inner().unwrap_or_else(|e| e.into_inner()))
}

/// A counting thread: counts segments from the queue into its own map, and
/// adds that map to `total` every `flush_bytes` and at the end. Segments
/// after one that failed (here or in another thread) are skipped, but every
/// one before it is still counted, so the failure reported is the first in
/// file order. After a failure it drains the queue, so the reader never
/// waits on a full queue. Returns the failed segment's number and error.
fn count_segments(
    count: CountFn,
    segments: &std::sync::Mutex<std::sync::mpsc::Receiver<(usize, String)>>,
    give_back: std::sync::mpsc::Sender<String>,
    total: &std::sync::Mutex<ChunkCounts>,
    failed: &std::sync::atomic::AtomicUsize,
    flush_bytes: usize,
) -> Result<(), (usize, String)> {
    use std::sync::atomic::Ordering;
    use std::sync::PoisonError;
    // The lock is held only while waiting for the next segment.
    let next = || segments.lock().unwrap_or_else(PoisonError::into_inner).recv();
    let flush = |counts: &mut ChunkCounts| {
        let mut total = total.lock().unwrap_or_else(PoisonError::into_inner);
        *total = merge_counts(std::mem::take(&mut *total), std::mem::take(counts));
    };
    // A panic is caught so that the queue is drained below before it is
    // handed on: the reader must never be left waiting.
    let mut current = 0; // the segment being counted
    let work = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut counts = ChunkCounts::default();
        let mut since_flush = 0;
        while let Ok((i, mut text)) = next() {
            if i > failed.load(Ordering::Relaxed) {
                continue;
            }
            current = i;
            count(&text, &mut counts).map_err(|e| (i, e))?;
            since_flush += text.len();
            if since_flush >= flush_bytes {
                flush(&mut counts);
                since_flush = 0;
            }
            text.clear();
            let _ = give_back.send(text);
        }
        flush(&mut counts);
        Ok(())
    }));
    match &work {
        Ok(Ok(())) => {}
        Ok(Err((i, _))) => _ = failed.fetch_min(*i, Ordering::Relaxed),
        Err(_) => _ = failed.fetch_min(current, Ordering::Relaxed),
    }
    while next().is_ok() {} // returns at once unless something failed
    work.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// Reads the files in segments of about `read_bytes` cut at safe cut points,
/// checks that they are UTF-8 and hands them to `send`, numbered in order.
fn read_segments(
    paths: &[std::path::PathBuf],
    read_bytes: usize,
    spare: &std::sync::mpsc::Receiver<String>,
    failed: &std::sync::atomic::AtomicUsize,
    mut on_bytes: impl FnMut(u64) -> Result<(), String>,
    mut send: impl FnMut((usize, String)) -> Result<(), String>,
) -> Result<(), String> {
    use std::io::Read;
    use std::sync::atomic::Ordering;
    let mut number = 0;
    let mut carry: Vec<u8> = Vec::new();
    for path in paths {
        let name = path.display();
        let mut file = std::fs::File::open(path).map_err(|e| format!("cannot read {name}: {e}"))?;
        let mut offset: u64 = 0; // file offset of the next segment's first byte
        let mut eof = false;
        carry.clear();
        while !eof {
            if failed.load(Ordering::Relaxed) != usize::MAX {
                return Ok(()); // a counting thread's error is reported instead
            }
            // A reused buffer has its pages already; a new one is sized to
            // hold a read and a usual carry without growing.
            let mut buf = spare
                .try_recv()
                .map(String::into_bytes)
                .unwrap_or_else(|_| Vec::with_capacity(read_bytes + (64 << 10)));
            buf.extend_from_slice(&carry);
            carry.clear();
            let cut = loop {
                // `read_to_end` on a `Take` reads into the spare capacity
                // without zeroing it first, and stops at the limit or EOF.
                let want = read_bytes as u64;
                let n = (&mut file).take(want).read_to_end(&mut buf).map_err(|e| format!("cannot read {name}: {e}"))?;
                eof = (n as u64) < want;
                if eof {
                    break buf.len();
                }
                if let Some(cut) = last_safe_cut(&buf) {
                    break cut;
                }
                if buf.len() >= crate::limits::MAX_UNCUT_BYTES {
                    // Bad bytes leave no cut point either: name them first.
                    return Err(match std::str::from_utf8(&buf) {
                        Err(e) if e.error_len().is_some() => not_utf8(path, offset, e),
                        _ => crate::limits::uncut_error(path, offset, buf.len()),
                    });
                }
                // No cut point yet (one huge line): read more.
            };
            carry.extend_from_slice(&buf[cut..]);
            buf.truncate(cut);
            let text = String::from_utf8(buf).map_err(|e| not_utf8(path, offset, e.utf8_error()))?;
            if !text.is_empty() {
                send((number, text))?;
                number += 1;
            }
            offset += cut as u64;
            on_bytes(cut as u64)?;
        }
    }
    Ok(())
}

/// The error for bytes that are not UTF-8, `e` found in the text read from
/// byte `offset` of the file at `path`.
fn not_utf8(path: &std::path::Path, offset: u64, e: std::str::Utf8Error) -> String {
    let at = offset + e.valid_up_to() as u64;
    format!(
        "{} is not valid UTF-8 at byte offset {at}{}; convert it to UTF-8 \
         (e.g. `iconv -f latin1 -t utf-8`) or remove the bad bytes",
        path.display(),
        crate::limits::line_suffix(path, at)
    )
}

// ---------------------------------------------------------------------------
// The merge loop

/// A token id inside the merge loop: `u16` while the vocabulary fits in 16
/// bits (targets up to 65,536 tokens: GPT-2's 50k and most trained
/// vocabularies), else `u32`. The word buffer is the loop's largest array
/// (8.2M symbols on FLORES-200), and heap entries shrink with it (24 -> 16
/// bytes): on FLORES-200 to a 50k vocabulary the peak went from ~200 to
/// ~180 MB (`examples/profile.rs`).
trait Symbol: Copy + Eq + std::hash::Hash + Send + Sync + 'static {
    /// `id` must fit (the caller picks the type from the target size).
    fn from_id(id: u32) -> Self;
    fn id(self) -> usize;
}

impl Symbol for u16 {
    #[inline]
    fn from_id(id: u32) -> Self {
        debug_assert!(id <= u16::MAX as u32);
        id as u16
    }
    #[inline]
    fn id(self) -> usize {
        self as usize
    }
}

impl Symbol for u32 {
    #[inline]
    fn from_id(id: u32) -> Self {
        id
    }
    #[inline]
    fn id(self) -> usize {
        self as usize
    }
}

type Pair<S> = (S, S);

/// The priority queue of pairs: a binary max-heap of `(count, pair)` whose
/// top is the winner of the tie-break rule above (highest count, then the
/// smallest (left bytes, right bytes)). Entries are not updated in place:
/// when a pair's count changes we push a new entry and let stale ones be
/// skipped on pop ("lazy deletion"), which is simpler and faster than a
/// decrease-key heap.
///
/// Hand-written rather than `std::collections::BinaryHeap` because the
/// tie-break needs the token bytes: with std's heap, `Ord` sees only the
/// entries, so each entry had to carry its own references to both tokens'
/// bytes (48 bytes and two reference-count updates per push). Here entries
/// are 16 bytes (24 with u32 symbols) and comparisons read the vocabulary only when counts and
/// left-token prefixes tie. On multilingual text the heap holds over a
/// million entries; this saved ~50 MB there and a third of the heap's time.
struct PairHeap<S> {
    items: Vec<Entry<S>>,
    /// The number of entries after the last rebuild.
    built: usize,
}

/// The floor for a heap of about `heap_pairs` pairs, given how many pairs
/// are counted in each class: the least count of the highest class such that
/// at least that many pairs (or all pairs) are in it or above; never below 2
/// while some pair is counted twice or more. 1 if none is.
///
/// From a histogram of the counts, not a sort of them: that needs no array
/// of a million counts beside the pairs at their most numerous.
fn floor_for(histogram: &[usize; CLASSES], heap_pairs: usize) -> i64 {
    let mut above = 0;
    for c in (2..CLASSES).rev() {
        above += histogram[c];
        if above >= heap_pairs || (c == 2 && above > 0) {
            return low(c);
        }
    }
    1
}

/// How many pairs are in each class: those in the map by their count, the
/// cold ones by the class they are kept in (a bound of their count).
fn histogram<S: Symbol>(pairs: &FxHashMap<Pair<S>, PairInfo>, cold: &Cold<S>) -> [usize; CLASSES] {
    let mut histogram = [0usize; CLASSES];
    for info in pairs.values() {
        histogram[class(info.count().max(1))] += 1;
    }
    cold.count_classes(&mut histogram);
    histogram
}

/// Count classes: a count below 16 is its own class; larger ones fall in 8
/// classes per bit length, by the three bits after the leading one.
const CLASSES: usize = 16 + 59 * 8;

/// The class of a count (1 ..= i64::MAX).
fn class(c: i64) -> usize {
    let c = c as u64;
    if c < 16 {
        return c as usize;
    }
    let bits = 64 - c.leading_zeros() as usize;
    16 + (bits - 5) * 8 + ((c >> (bits - 4)) & 7) as usize
}

/// The least count of a class.
fn low(class: usize) -> i64 {
    if class < 16 {
        return class as i64;
    }
    let (bits, step) = ((class - 16) / 8 + 5, (class - 16) % 8);
    (8 + step as i64) << (bits - 4)
}

/// A heap entry: a pair, its count when pushed, and the first 4 bytes of its
/// left token (big-endian, zero-padded). Among equal counts (most late
/// comparisons: thousands of pairs have count 2 or 3) the prefix decides
/// without reading the vocabulary, whose scattered bytes cost cache misses.
/// (An 8-byte prefix would make u16 entries 24 bytes instead of 16.)
#[derive(Clone, Copy)]
struct Entry<S> {
    count: u64,
    prefix: u32,
    pair: Pair<S>,
}

impl<S: Symbol> PairHeap<S> {
    /// Whether `a` must come out before `b`.
    #[inline]
    fn before(vocab: &[Arc<[u8]>], a: &Entry<S>, b: &Entry<S>) -> bool {
        if a.count != b.count {
            return a.count > b.count;
        }
        if a.prefix != b.prefix {
            // Big-endian prefixes order like the bytes they hold; zero
            // padding can make two prefixes equal, never misorder them.
            return a.prefix < b.prefix;
        }
        let bytes = |e: &Entry<S>| (&vocab[e.pair.0.id()], &vocab[e.pair.1.id()]);
        bytes(a) < bytes(b)
    }

    /// Empties the heap and pushes every pair counted at least `floor` times.
    fn rebuild(&mut self, vocab: &[Arc<[u8]>], pairs: &FxHashMap<Pair<S>, PairInfo>, floor: i64) {
        // No pass to count them first: the array is reserved at its likely
        // largest size when the heap is made (see `learn`).
        self.items.clear();
        for (&p, info) in pairs {
            if info.count() >= floor {
                self.items.push(Entry { count: info.count() as u64, prefix: prefix(vocab, p), pair: p });
            }
        }
        // Floyd's heap construction: O(n) where pushing each would be O(n log n).
        for i in (0..self.items.len() / 2).rev() {
            self.sift_down(vocab, i);
        }
        self.built = self.items.len();
    }

    fn push(&mut self, vocab: &[Arc<[u8]>], count: u64, pair: Pair<S>) {
        let mut i = self.items.len();
        self.items.push(Entry { count, prefix: prefix(vocab, pair), pair });
        while i > 0 {
            let parent = (i - 1) / 2;
            if !Self::before(vocab, &self.items[i], &self.items[parent]) {
                break;
            }
            self.items.swap(i, parent);
            i = parent;
        }
    }

    fn pop(&mut self, vocab: &[Arc<[u8]>]) -> Option<(u64, Pair<S>)> {
        if self.items.is_empty() {
            return None;
        }
        // The last entry takes the top's place and sinks to where it belongs.
        let top = self.items.swap_remove(0);
        self.sift_down(vocab, 0);
        Some((top.count, top.pair))
    }

    /// Moves the entry at `i` down until neither child must come out before it.
    fn sift_down(&mut self, vocab: &[Arc<[u8]>], mut i: usize) {
        let n = self.items.len();
        loop {
            let left = 2 * i + 1;
            if left >= n {
                break;
            }
            let right = left + 1;
            let child =
                if right < n && Self::before(vocab, &self.items[right], &self.items[left]) { right } else { left };
            if !Self::before(vocab, &self.items[child], &self.items[i]) {
                break;
            }
            self.items.swap(i, child);
            i = child;
        }
    }
}

/// The first 4 bytes of `pair`'s left token, big-endian, zero-padded (see [`Entry`]).
fn prefix<S: Symbol>(vocab: &[Arc<[u8]>], pair: Pair<S>) -> u32 {
    let left = &vocab[pair.0.id()];
    let mut prefix = [0u8; 4];
    let n = left.len().min(4);
    prefix[..n].copy_from_slice(&left[..n]);
    u32::from_be_bytes(prefix)
}

/// Replaces every non-overlapping (left to right) occurrence of `pair` in
/// `word` by `new`, in place; returns the new length (shorter iff it merged).
fn merge_word<S: Symbol>(word: &mut [S], pair: Pair<S>, new: S, f: i64, delta: &mut FxHashMap<Pair<S>, i64>) -> usize {
    // In place (the output never overtakes the input), and only the pairs
    // around each occurrence change: with x a b y -> x N y, the pairs (x,a),
    // (a,b), (b,y) lose `f` and (x,N), (N,y) gain it. `x` is read from the
    // output, so back-to-back occurrences (a b a b -> N N) come out right:
    // the (N,a) added by the first is removed by the second.
    // (Subtracting all of a word's pairs and adding them back after the merge
    // is simpler but does twice the hash updates, and this loop dominates
    // the first merges, which touch a large share of all words.)
    let (a, b) = pair;
    let n = word.len();
    let (mut i, mut out) = (0, 0);
    let mut merged = 0;
    while i < n {
        if i + 1 < n && word[i] == a && word[i + 1] == b {
            merged += 1;
            if out > 0 {
                let x = word[out - 1];
                *delta.entry((x, a)).or_insert(0) -= f;
                *delta.entry((x, new)).or_insert(0) += f;
            }
            if i + 2 < n {
                let y = word[i + 2];
                *delta.entry((b, y)).or_insert(0) -= f;
                *delta.entry((new, y)).or_insert(0) += f;
            }
            word[out] = new;
            i += 2;
        } else {
            word[out] = word[i];
            i += 1;
        }
        out += 1;
    }
    if merged > 0 {
        *delta.entry(pair).or_insert(0) -= merged * f;
    }
    out
}

/// The pairs of `word` that hold `new`: after a merge, the only pairs new to it.
fn new_pairs<S: Symbol>(word: &[S], new: S) -> impl Iterator<Item = Pair<S>> + '_ {
    word.windows(2).filter(move |p| p[0] == new || p[1] == new).map(|p| (p[0], p[1]))
}

/// Asks the CPU to bring `x` into cache (a hint; a no-op off x86-64).
#[inline(always)]
fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and `x` is a valid reference.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(x as *const T as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// One learned merge: `left` and `right` become `new`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Merge {
    pub left: u32,
    pub right: u32,
    pub new: u32,
}

/// All words in one flat buffer: word `i` is `symbols[w.start..w.start + w.len]`
/// with `w = meta[i]`; merging shrinks `w.len` in place and leaves the tail
/// unused, until [`Words::compact`] slides the words down over the unused
/// symbols.
///
/// Why flat: a `Vec<Vec<u32>>` costs each word a 24-byte header and a heap
/// block of its own (with the allocator's rounding, ~90 bytes for an
/// 11-symbol word, against 60 here), and scatters words over the heap. On
/// FLORES-200 (734k distinct chunks) this saved ~30 MB of peak memory.
/// Start, length and count sit together in one record because a merge visits
/// its words in no useful order, and separate arrays cost a cache miss each
/// (with the one-core loop, see `learn_merges`, merging 10 MB of English went
/// from 0.38 to 0.36 s, median of 8, best 0.33 to 0.28 s).
struct Words<S> {
    symbols: Vec<S>,
    meta: Vec<Word>,
    /// The symbols in use: the sum of the words' lengths.
    live: usize,
}

/// 12 bytes: the count is a `u32`, and a chunk counted more often than that
/// (only in corpora of tens of GB) becomes several words with the same bytes,
/// whose counts add up to its own: every pair count, and so every merge, is
/// the same. With a `u64` count the record took 16 bytes: 5 MB more on the
/// 1.33M words of the benchmark's 1 GB scale file.
#[derive(Clone, Copy)]
struct Word {
    freq: u32,
    start: u32,
    len: u32,
}

/// How many words a chunk counted `freq` times becomes (see [`Word`]).
fn pieces(freq: u64) -> usize {
    freq.div_ceil(u64::from(u32::MAX)) as usize
}

impl<S: Symbol> Words<S> {
    fn new(counts: ChunkCounts) -> Result<Words<S>, String> {
        // Words of one byte have no pairs and can never change: dropped.
        // Sized exactly first, so the buffers never double while filling.
        let (mut n, mut total) = (0, 0);
        counts.for_each(|b, freq| {
            if b.len() >= 2 {
                n += pieces(freq);
                total += b.len() * pieces(freq);
            }
        });
        // Word ids and offsets are u32 (they fill the per-pair word lists),
        // and ids stay below `NO_WORD` (see `ColdPair`).
        if n >= NO_WORD as usize || total > u32::MAX as usize {
            return Err(format!(
                "too many distinct chunks to train on ({n}, {total} bytes; at most 2G chunks and 4G bytes): \
                 train on a sample of the corpus"
            ));
        }
        let mut w = Words { symbols: Vec::with_capacity(total), meta: Vec::with_capacity(n), live: total };
        counts.drain(|bytes, mut freq| {
            if bytes.len() >= 2 {
                while freq > 0 {
                    let part = freq.min(u64::from(u32::MAX));
                    freq -= part;
                    w.meta.push(Word { start: w.symbols.len() as u32, freq: part as u32, len: bytes.len() as u32 });
                    w.symbols.extend(bytes.iter().map(|&b| S::from_id(u32::from(b))));
                }
            }
        });
        Ok(w)
    }

    fn word(&self, i: usize) -> &[S] {
        let w = self.meta[i];
        &self.symbols[w.start as usize..(w.start + w.len) as usize]
    }

    fn count(&self) -> usize {
        self.meta.len()
    }

    /// When a quarter of the buffer is unused, slides the words down over
    /// the unused symbols, in order, and gives the freed end back to the OS.
    ///
    /// Merging shortens words fast at first: on the benchmark's scale file
    /// (1.33M words), 13.4M symbols were 7.5M after 2,000 merges and 4.4M
    /// after 49,000, while the buffer kept its first size. A slide is one
    /// pass over the buffer, a few times in a whole training.
    fn compact(&mut self, min_bytes: usize) {
        let len = self.symbols.len();
        if len * std::mem::size_of::<S>() > min_bytes && 4 * (len - self.live) > len {
            let mut to = 0;
            for w in &mut self.meta {
                // Words lie in the order of `meta`, so none is overwritten
                // before it moves.
                let (from, n) = (w.start as usize, w.len as usize);
                self.symbols.copy_within(from..from + n, to);
                w.start = to as u32;
                to += n;
            }
            self.symbols.truncate(to);
            release_spare(&self.symbols);
        }
    }
}

/// What we know about one pair: its count over all words and the words it
/// occurs in. The lists may name a word that has lost the pair since (it is
/// skipped when the pair is merged): removing entries would cost more than
/// skipping them. A word is never named twice in a row.
///
/// 20 bytes, aligned to 4, so a map bucket (pair and info) is 24 with `u16`
/// symbols. The map held over a million pairs on large multilingual corpora,
/// and its buckets were the largest single item of memory there (since then,
/// only the pairs near the top stay in the map: see [`Cold`]). Most lists
/// are short (at the end of FLORES-200: 505k pairs occur in one word, 128k in
/// two, 61k in three, 150k in more), so up to two word ids live in the record
/// itself, and longer lists in the shared [`Lists`] arena.
///
/// History: a count, an offset, a length and a `SmallVec` of four inline
/// words took 40 bytes (48 a bucket). An `i64` count and three inline words
/// took 24 (32 a bucket: the `i64` aligned the record to 8, so the 4-byte pair
/// padded the bucket). With this layout, lists of three words go to the
/// arena, and the peak of training to 50k tokens (`examples/profile`) went
/// 214 -> 197 MB on 1 GB of mixed text (2M buckets), 124 -> 115 MB on
/// FLORES-200 and 49 -> 45 MB on 100 MB of English.
#[derive(Clone, Copy, Default)]
struct PairInfo {
    /// The count over all words, as (low, high) halves of an `i64`: see above.
    count: [u32; 2],
    /// Inline: the number of word ids in `slots`. In the arena: the bytes the
    /// list uses there, with [`IN_ARENA`] set.
    len: u32,
    /// Inline: the word ids. In the arena: the list's offset and capacity, in bytes.
    slots: [u32; INLINE],
}

const INLINE: usize = 2;
const IN_ARENA: u32 = 1 << 31;
// The layout the comment above promises.
const _: () = assert!(std::mem::size_of::<(Pair<u16>, PairInfo)>() == 24);

impl PairInfo {
    fn count(&self) -> i64 {
        (u64::from(self.count[0]) | u64::from(self.count[1]) << 32) as i64
    }

    fn set_count(&mut self, c: i64) {
        self.count = [c as u32, ((c as u64) >> 32) as u32];
    }

    /// Inline: the number of words; in the arena: the bytes used.
    fn len(&self) -> usize {
        (self.len & !IN_ARENA) as usize
    }

    fn in_arena(&self) -> bool {
        self.len & IN_ARENA != 0
    }
}

/// The word lists longer than [`INLINE`], one after another in one byte array.
///
/// **Encoding.** A list is sorted (see below), so it is stored as the gaps
/// between successive word ids, each a LEB128 varint (7 bits a byte),
/// followed by a 4-byte trailer holding the last id plus one (the next gap is
/// taken from it without decoding the list). Word `w` after last id `l` is
/// the gap `w - l` (`w + 1` for the first); a gap of zero is an escape,
/// followed by `w + 1` itself, for a word that comes before the last (see
/// below). On the
/// 1.33M distinct chunks of the benchmark's scale file this holds the lists
/// in 21 MB instead of 48 (u32 ids) when the lists are at their largest: the
/// ids of a pair's words are a few hundred apart for frequent pairs (one
/// byte), and a few thousand for the rest (two).
///
/// **Why sorted:** the byte pairs' lists are written in word order, and a
/// merge visits its words in the order of its list and gives each of its new
/// pairs their words in that order; a new pair's list is made during one merge
/// (it holds the new token) and grows in no other, except when a later merge
/// reaches the same bytes again and reuses the token's id. Only then does an
/// id come out of order, and the escape stores it.
///
/// **Why one array** and not a heap vector per list: the byte pairs' lists
/// are most entries at the start (11M of 12M on the scale file) and are
/// written once, exactly sized, in one pass; and lists that grow during
/// merging, each in a heap block of its own, left the allocator's pages
/// partly used as they grew and died (RSS 20-40 MB above the live bytes on
/// FLORES-200). Here a list that outgrows its space moves to the end with
/// twice the capacity, and its old space is dead until [`Lists::compact`]
/// slides the live lists down over it, in place (a copy into a new array
/// would hold both at once), and gives the freed end back to the OS.
struct Lists {
    arena: Vec<u8>,
    /// Bytes of the arena that no list owns any more.
    dead: usize,
}

/// The trailer of an arena list: the last word id plus one (0: none yet).
/// At the end, not the start, so adding a word reads and writes one place
/// (a header cost a second cache miss per word added to a short list).
const TRAILER: usize = 4;

/// The bytes of `x` as a LEB128 varint.
#[inline]
fn varint_len(x: u32) -> usize {
    match x {
        0..=0x7f => 1,
        0x80..=0x3fff => 2,
        0x4000..=0x1f_ffff => 3,
        0x20_0000..=0xfff_ffff => 4,
        _ => 5,
    }
}

/// The bytes of `word`'s entry in a list whose last id plus one is `next`.
fn entry_len(next: u32, word: u32) -> usize {
    if word + 1 > next {
        varint_len(word + 1 - next)
    } else {
        1 + varint_len(word + 1)
    }
}

/// Writes `x` as a LEB128 varint at the start of `out`; returns its length.
#[inline]
fn put_varint(mut x: u32, out: &mut [u8]) -> usize {
    let mut n = 0;
    while x >= 0x80 {
        out[n] = x as u8 | 0x80;
        x >>= 7;
        n += 1;
    }
    out[n] = x as u8;
    n + 1
}

/// Reads a LEB128 varint at `bytes[*i]`, moving `i` past it.
#[inline]
fn get_varint(bytes: &[u8], i: &mut usize) -> u32 {
    let mut x = 0u32;
    let mut shift = 0;
    loop {
        let b = bytes[*i];
        *i += 1;
        x |= u32::from(b & 0x7f) << shift;
        if b < 0x80 {
            return x;
        }
        shift += 7;
    }
}

impl Lists {
    /// The trailer of a list that ends at `end`.
    fn trailer(&self, end: usize) -> u32 {
        u32::from_le_bytes(self.arena[end - TRAILER..end].try_into().expect("4 bytes"))
    }

    /// Appends the words of `info`'s list to `out`, in list order.
    fn read(&self, info: &PairInfo, out: &mut Vec<u32>) {
        if !info.in_arena() {
            out.extend_from_slice(&info.slots[..info.len()]);
            return;
        }
        let at = info.slots[0] as usize;
        let bytes = &self.arena[at..at + info.len() - TRAILER];
        let (mut i, mut next) = (0, 0u32); // next: the last id plus one
        while i < bytes.len() {
            match get_varint(bytes, &mut i) {
                0 => next = get_varint(bytes, &mut i),
                gap => next += gap,
            }
            out.push(next - 1);
        }
    }

    /// Adds `word` to `info`'s list, unless it is the list's last word.
    #[inline]
    fn push(&mut self, info: &mut PairInfo, word: u32) -> Result<(), String> {
        if !info.in_arena() {
            let len = info.len();
            if len > 0 && info.slots[len - 1] == word {
                return Ok(());
            }
            if len < INLINE {
                info.slots[len] = word;
                info.len += 1;
                return Ok(());
            }
            // Full inline list: it moves to the arena, with room for as many
            // bytes again.
            let words = [info.slots[0], info.slots[1], word];
            let mut next = 0;
            let mut data = TRAILER;
            for w in words {
                data += entry_len(next, w);
                next = w + 1;
            }
            let cap = 2 * data - TRAILER;
            info.slots = [self.grow_from(cap, |_| {})?, cap as u32];
            info.len = IN_ARENA | TRAILER as u32;
            for w in words {
                self.append(info, w)?;
            }
            return Ok(());
        }
        self.append(info, word)
    }

    /// [`Lists::push`] for a list in the arena.
    #[inline]
    fn append(&mut self, info: &mut PairInfo, word: u32) -> Result<(), String> {
        let (mut at, used, cap) = (info.slots[0] as usize, info.len(), info.slots[1] as usize);
        let next = self.trailer(at + used);
        if next == word + 1 {
            return Ok(());
        }
        let n = entry_len(next, word);
        if used + n > cap {
            at = self.relocate(info, n)?;
        }
        // The entry goes where the trailer was, and the trailer after it.
        let end = at + used - TRAILER;
        let entry = &mut self.arena[end..end + n];
        if word + 1 > next {
            put_varint(word + 1 - next, entry);
        } else {
            entry[0] = 0; // the escape, then the id itself
            put_varint(word + 1, &mut entry[1..]);
        }
        self.arena[end + n..end + n + TRAILER].copy_from_slice(&(word + 1).to_le_bytes());
        info.len += n as u32;
        Ok(())
    }

    /// Moves `info`'s list, too full for `n` bytes more, to the end of the
    /// arena with twice the room; returns its new offset. (Out of line: rare,
    /// and `append` is inlined into the loops that fill the lists.)
    #[cold]
    #[inline(never)]
    fn relocate(&mut self, info: &mut PairInfo, n: usize) -> Result<usize, String> {
        let (from, used, cap) = (info.slots[0] as usize, info.len(), info.slots[1] as usize);
        let room = (2 * used).max(used + n);
        let at = self.grow_from(room, |arena| arena.extend_from_within(from..from + used))?;
        self.dead += cap;
        info.slots = [at, room as u32];
        Ok(at as usize)
    }

    /// Appends `cap` bytes for a list (its first bytes written by `copy`, the
    /// rest zero); returns their offset.
    fn grow_from(&mut self, cap: usize, copy: impl FnOnce(&mut Vec<u8>)) -> Result<u32, String> {
        let at = self.arena.len();
        if at + cap > u32::MAX as usize {
            return Err("too many pair occurrences to train on (over 4 GB of word lists): \
                        train on a sample of the corpus"
                .into());
        }
        if at + cap > self.arena.capacity() {
            // By a half, not by Vec's doubling: this is a large array, and
            // the copy holds the old and the new one at once.
            self.arena.reserve_exact(cap.max(at / 2));
        }
        copy(&mut self.arena);
        self.arena.resize(at + cap, 0);
        Ok(at as u32)
    }

    /// Marks `info`'s list (if in the arena) as dead.
    fn free(&mut self, info: &PairInfo) {
        if info.in_arena() {
            self.dead += info.slots[1] as usize;
        }
    }

    /// When a quarter of the array is dead, slides the live lists down over
    /// the dead space, in place, and gives the freed end back to the OS.
    ///
    /// Why a quarter: each slide reads the whole pair map, and late merges
    /// kill a few lists each, often. On FLORES-200 to 50k tokens (merge time,
    /// median of 3; peak): never 1.23 s, a half 1.24 s (98 MB), a quarter
    /// 1.27 s (88 MB), an eighth 1.44 s (86 MB).
    /// Why give the end back: space once written stays resident while the
    /// array keeps its capacity, so without it the array's RSS stayed at its
    /// longest (15M ids on the scale file) while its live lists shrank to 6M
    /// ids. Shrinking the array instead would copy it into a smaller one, and
    /// that copy, made when the pair map is full-size, raised the peak
    /// (128 -> 155 MB on FLORES-200).
    ///
    /// The lists are those of the pairs in the map and of the cold ones.
    fn compact<S: Symbol>(&mut self, hot: &mut FxHashMap<Pair<S>, PairInfo>, cold: &mut Cold<S>, tuning: Tuning) {
        let len = self.arena.len();
        if len > tuning.min_slide && 4 * self.dead > len {
            // In the order of their offsets, each list moves down to where
            // the one before it ends, sized exactly (the next push moves it
            // to the end with twice the room).
            // Sorted as (offset, key) pairs, 8 bytes each: the key is a cold
            // pair's place in `cold` (below 2^31: that many cold pairs would
            // take 24 GB), or (with `IN_ARENA` set) an index into `hot`, the
            // map's records. (The offset sits beside its key: a key read
            // through a reference was a cache miss per comparison. One array
            // of (offset, reference) took 16 bytes a list, 5 MB at the end of
            // the scale file's merges, on top of everything else.)
            //
            // In passes, each over the lists that start in one range of
            // offsets, lowest range first: the sorted array is the slide's
            // only extra memory, and on the scale file it held ~700k lists
            // at once (5.5 MB), which set the peak of the whole training (see
            // `Tuning::slide_pass`). A list moved in one pass starts below the
            // next range, so no later pass sees it again, and every list
            // still moves down over dead space only.
            let mut hot: Vec<&mut PairInfo> = hot.values_mut().filter(|i| i.in_arena()).collect();
            let starts = cold.starts();
            let passes = len.div_ceil(tuning.slide_pass.max(1));
            let mut to = 0;
            for pass in 0..passes {
                let range = (pass * len / passes) as u32..((pass + 1) * len / passes) as u32;
                let mut live: Vec<(u32, u32)> = hot
                    .iter()
                    .enumerate()
                    .filter(|(_, i)| range.contains(&i.slots[0]))
                    .map(|(k, i)| (i.slots[0], IN_ARENA | k as u32))
                    .collect();
                cold.for_each_in_arena(|at, place| {
                    if range.contains(&at) {
                        live.push((at, place));
                    }
                });
                live.sort_unstable();
                for (from, key) in live {
                    let from = from as usize;
                    let used = if key & IN_ARENA != 0 {
                        let info = &mut hot[(key & !IN_ARENA) as usize];
                        let used = info.len();
                        info.slots = [to as u32, used as u32];
                        used
                    } else {
                        cold.move_list(&starts, key, to as u32)
                    };
                    self.arena.copy_within(from..from + used, to);
                    to += used;
                }
            }
            self.arena.truncate(to);
            self.dead = 0;
            release_spare(&self.arena);
        }
    }
}

/// The pairs kept out of the pair map ("cold"): below the heap's floor, and
/// unable to gain occurrences. Each keeps its word list, and the class of its
/// count when it went cold (see [`class`]) bounds its count from then on: the
/// words that lose a cold pair do not update anything.
///
/// **Why a pair can only lose occurrences:** a merge makes new pairs only
/// around its new token, so once the merge that made the later of a pair's
/// two tokens is done, the pair gains nothing more; it can only lose
/// occurrences, as its words are merged. The one exception is a merge that
/// reuses an existing id (same bytes reached again, see `learn`): the cold
/// pairs holding that id are thawed first.
///
/// **Why:** merging makes about a pair per word (1.14M pairs from 1.33M words
/// on the benchmark's 1 GB scale file, 850k on FLORES-200), and few of them
/// ever come near the top. In the map, with its slack, they took 52 MB of
/// table (2M buckets of 24 bytes). Here each takes 12 bytes (pair and list,
/// no count: its class is where it is kept), in blocks of [`COLD_BLOCK`]
/// (no doubling copy), and the map keeps only the pairs that may win soon.
/// A cold pair costs nothing when its words are merged either.
///
/// **Thawing:** when the floor drops, the classes that reach it are thawed:
/// each pair gets its exact count back from its word list (see [`recount`])
/// and rejoins the map (or goes, if no word holds it any more).
struct Cold<S> {
    /// By class: blocks of at most `COLD_BLOCK` entries, all full but the last.
    classes: Vec<Vec<Vec<ColdPair<S>>>>,
}

/// Entries per block of [`Cold`] (12 KB with `u16` symbols).
const COLD_BLOCK: usize = 1024;

/// A cold pair and its word list: inline, up to two word ids (`b` is
/// [`NO_WORD`] for one); in the arena, `a` is its offset and `b` its bytes
/// with [`IN_ARENA`] set (no spare room: it never grows).
#[derive(Clone, Copy)]
struct ColdPair<S> {
    pair: Pair<S>,
    a: u32,
    b: u32,
}

/// No word (in a [`ColdPair`]'s second inline slot). Word ids are below it
/// (see `Words::new`), and it does not have [`IN_ARENA`] set.
const NO_WORD: u32 = IN_ARENA - 1;

impl<S> ColdPair<S> {
    /// Its record as in the map, with count 0.
    fn info(&self) -> PairInfo {
        let mut info = PairInfo::default();
        if self.b & IN_ARENA != 0 {
            info.len = self.b;
            info.slots = [self.a, self.b & !IN_ARENA];
        } else {
            info.slots = [self.a, self.b];
            info.len = u32::from(self.a != NO_WORD) + u32::from(self.b != NO_WORD);
        }
        info
    }
}

impl<S: Symbol> Cold<S> {
    fn new() -> Cold<S> {
        Cold { classes: (0..CLASSES).map(|_| Vec::new()).collect() }
    }

    fn is_empty(&self) -> bool {
        self.classes.iter().all(Vec::is_empty)
    }

    /// Moves a pair counted `count` times (at least 1) out of the map. The
    /// spare room of its arena list is given up (the list never grows again).
    fn push(&mut self, pair: Pair<S>, count: i64, info: &PairInfo, lists: &mut Lists) {
        let (a, b) = if info.in_arena() {
            lists.dead += info.slots[1] as usize - info.len();
            (info.slots[0], IN_ARENA | info.len() as u32)
        } else {
            match info.len() {
                0 => (NO_WORD, NO_WORD),
                1 => (info.slots[0], NO_WORD),
                _ => (info.slots[0], info.slots[1]),
            }
        };
        push_block(&mut self.classes[class(count)], ColdPair { pair, a, b });
    }

    /// Adds the number of cold pairs in each class to `histogram`.
    fn count_classes(&self, histogram: &mut [usize; CLASSES]) {
        for (h, blocks) in histogram.iter_mut().zip(&self.classes) {
            *h += blocks.iter().map(Vec::len).sum::<usize>();
        }
    }

    /// Takes out the cold pairs of classes `from..` and those holding token
    /// `id` (if given), in blocks.
    fn take(&mut self, from: usize, id: Option<usize>) -> Vec<Vec<ColdPair<S>>> {
        let mut taken = Vec::new();
        for (c, blocks) in self.classes.iter_mut().enumerate() {
            if c >= from {
                taken.append(blocks);
            } else if let Some(id) = id {
                // Rare (a reused id): the class is rebuilt without them.
                let mut keep = Vec::new();
                for e in std::mem::take(blocks).into_iter().flatten() {
                    if e.pair.0.id() == id || e.pair.1.id() == id {
                        push_block(&mut taken, e);
                    } else {
                        push_block(&mut keep, e);
                    }
                }
                *blocks = keep;
            }
        }
        taken
    }

    /// Where each class starts when the cold pairs are numbered class by
    /// class (as `for_each_in_arena` numbers them), and the total at the end.
    fn starts(&self) -> Vec<usize> {
        let mut starts = vec![0];
        for blocks in &self.classes {
            starts.push(starts.last().expect("one") + blocks.iter().map(Vec::len).sum::<usize>());
        }
        starts
    }

    /// Calls `f(offset, place)` for each cold list in the arena.
    fn for_each_in_arena(&self, mut f: impl FnMut(u32, u32)) {
        let mut place = 0u32;
        for blocks in &self.classes {
            for e in blocks.iter().flatten() {
                if e.b & IN_ARENA != 0 {
                    f(e.a, place);
                }
                place += 1;
            }
        }
    }

    /// Sets the offset of the list at `place` (as `for_each_in_arena` numbers
    /// them; `starts` from [`Cold::starts`]) to `to`; returns its bytes.
    fn move_list(&mut self, starts: &[usize], place: u32, to: u32) -> usize {
        let place = place as usize;
        let c = starts.partition_point(|&s| s <= place) - 1;
        let i = place - starts[c];
        let e = &mut self.classes[c][i / COLD_BLOCK][i % COLD_BLOCK];
        e.a = to;
        (e.b & !IN_ARENA) as usize
    }
}

/// Appends `e` to blocks of at most [`COLD_BLOCK`] entries, all full but the
/// last (a new block when the last is full).
fn push_block<T>(blocks: &mut Vec<Vec<T>>, e: T) {
    if blocks.last().is_none_or(|b| b.len() == COLD_BLOCK) {
        blocks.push(Vec::with_capacity(COLD_BLOCK));
    }
    blocks.last_mut().expect("just made").push(e);
}

/// The exact count of `pair` over the words of its list: a cold pair's
/// stored count is an upper bound (see [`Cold`]). Counted as the map counts:
/// every adjacent position, times the word's count. A list may name a word
/// twice (see `Lists`): each is counted once. `buf` is scratch.
fn recount<S: Symbol>(words: &Words<S>, lists: &Lists, pair: Pair<S>, info: &PairInfo, buf: &mut Vec<u32>) -> i64 {
    buf.clear();
    lists.read(info, buf);
    buf.sort_unstable();
    buf.dedup();
    buf.iter()
        .map(|&w| {
            let n = words.word(w as usize).windows(2).filter(|x| (x[0], x[1]) == pair).count();
            n as i64 * words.meta[w as usize].freq as i64
        })
        .sum()
}

/// Gives pairs taken from [`Cold`] their exact counts: those counted at
/// least `hot_from` times go back in the map, the others back to `cold` (by
/// their exact count), and those that no word holds any more go.
///
/// (Not all into the map: when the floor drops, most of the pairs thawed are
/// below it after all. Put in the map, they made it double, old and new
/// table at once, just to leave it again: 17 MB above the rest at the end of
/// the scale file's merges.)
fn thaw<S: Symbol>(
    taken: Vec<Vec<ColdPair<S>>>,
    hot_from: i64,
    pairs: &mut FxHashMap<Pair<S>, PairInfo>,
    cold: &mut Cold<S>,
    lists: &mut Lists,
    words: &Words<S>,
) {
    let mut scratch = Vec::new();
    for e in taken.into_iter().flatten() {
        let mut info = e.info();
        let c = recount(words, lists, e.pair, &info, &mut scratch);
        if c <= 0 {
            lists.free(&info);
        } else if c >= hot_from {
            info.set_count(c);
            pairs.insert(e.pair, info);
        } else {
            cold.push(e.pair, c, &info, lists);
        }
    }
}

/// Gives the memory pages of `v`'s spare capacity back to the OS (Linux;
/// elsewhere they stay resident until `v` is freed).
fn release_spare<T: Copy>(v: &Vec<T>) {
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let size = std::mem::size_of::<T>();
        let base = v.as_ptr() as usize;
        let start = (base + v.len() * size).next_multiple_of(PAGE);
        let end = (base + v.capacity() * size) / PAGE * PAGE;
        if end > start {
            // SAFETY: the range lies inside `v`'s allocation, past its last
            // element: no value lives there, and `Vec` never reads spare
            // capacity before writing it. The pages read as zeros when next
            // touched. An error (none is expected) leaves them resident.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

/// Pass 1's tally of one pair in a run of words: its count, the number of
/// words it occurs in, the bytes of their list and the last of them plus one.
#[derive(Clone, Copy, Default)]
struct Tally {
    count: i64,
    words: u32,
    bytes: u32,
    next: u32,
}

/// The initial pairs (byte pairs): their counts and word lists.
fn initial_pairs<S: Symbol>(words: &Words<S>) -> Result<(FxHashMap<Pair<S>, PairInfo>, Lists), String> {
    // Pass 1, on all cores: each pair's count, words and list bytes. A run of
    // words (rayon's piece of work) is visited in order, so its gaps are
    // exact but its first, taken from id 0: the sum over runs is an upper
    // bound, a few bytes above the list's size.
    let tallies = (0..words.count())
        .into_par_iter()
        .fold(FxHashMap::<Pair<S>, Tally>::default, |mut m, i| {
            let f = words.meta[i].freq as i64;
            let id1 = i as u32 + 1;
            for p in words.word(i).windows(2) {
                let t = m.entry((p[0], p[1])).or_default();
                t.count += f;
                if t.next != id1 {
                    t.words += 1;
                    t.bytes += varint_len(id1 - t.next) as u32;
                    t.next = id1;
                }
            }
            m
        })
        .reduce(FxHashMap::default, |mut a, mut b| {
            if b.len() > a.len() {
                std::mem::swap(&mut a, &mut b);
            }
            for (k, t) in b {
                let e = a.entry(k).or_default();
                e.count += t.count;
                e.words += t.words;
                e.bytes = e.bytes.saturating_add(t.bytes);
            }
            a
        });
    // Lists of more than `INLINE` words get their space in the arena, one
    // after another...
    let mut pairs = FxHashMap::with_capacity_and_hasher(tallies.len(), Default::default());
    let mut next: usize = 0;
    for (p, t) in tallies {
        let mut info = PairInfo::default();
        info.set_count(t.count);
        if t.words as usize > INLINE {
            let cap = TRAILER + t.bytes as usize;
            info.len = IN_ARENA | TRAILER as u32;
            info.slots = [next as u32, cap as u32];
            next += cap;
            u32::try_from(next).map_err(|_| "too many distinct chunks to train on (over 4 GB of word lists)")?;
        }
        pairs.insert(p, info);
    }
    // ...and are filled in pass 2, in word order. Twice as much room again
    // is reserved for the lists of the first merges: it costs address space,
    // not memory, until they write it, and growing the array later copies it
    // (old and new array at once). On the scale file's four corpora the
    // arena reaches 2.1 times its first size by merge ~330; with room for
    // twice, that copy was the peak of the merge loop (113 MB; 57 MB above
    // the rest with ids as u32 and a quarter's room). If the system refuses
    // that much address space, it is reserved as it is needed.
    let mut lists = Lists { arena: Vec::new(), dead: 0 };
    if lists.arena.try_reserve_exact(3 * next).is_err() {
        lists.arena.reserve_exact(next);
    }
    lists.arena.resize(next, 0);
    for i in 0..words.count() {
        for p in words.word(i).windows(2) {
            lists.push(pairs.get_mut(&(p[0], p[1])).expect("counted in pass 1"), i as u32)?;
        }
    }
    Ok((pairs, lists))
}

/// Learns merges until the vocabulary holds `target` ordinary tokens (256
/// bytes included) or no pair is left. `on_merge` is called with each merge
/// as it is made and the vocabulary size after it (for progress, and for the
/// Python tokenizer's state, made meanwhile on another core), and may stop
/// the work by returning an error (Ctrl-C).
///
/// The merge loop runs on one core. It once did merges that touch over 1/32
/// of the words on all cores (runs of words per thread, deltas summed after):
/// on this project's 2-core machine that was slower than one core on 10 MB of
/// English (0.08-0.11 s against 0.03-0.05 s for those ~57 merges) and no
/// faster on 100 MB or on 200 languages, because most of the loop's time is
/// in the tens of thousands of later merges that touch a few words each.
pub fn learn_merges(
    counts: ChunkCounts,
    target: usize,
    on_merge: impl FnMut(&Merge, usize) -> Result<(), String>,
) -> Result<Vec<Merge>, String> {
    if target <= 1 << 16 {
        learn::<u16>(counts, target, on_merge, Tuning::DEFAULT)
    } else {
        learn::<u32>(counts, target, on_merge, Tuning::DEFAULT)
    }
}

/// Sizes that tune the merge loop's memory and speed, never its result
/// (tests pass small ones, to exercise on small inputs what they govern).
#[derive(Clone, Copy)]
struct Tuning {
    /// Arrays shorter than this many bytes are never slid (see
    /// [`Words::compact`] and [`Lists::compact`]): there is little to give back.
    min_slide: usize,
    /// About how many pairs the heap is built with (see [`floor_for`]).
    /// Merging 1 GB of mixed text to 50k (`examples/profile`, peak and
    /// time): 2^16 pairs 102.2 MB, 1.51 s; 2^15 95.5 MB, 1.50 s; 2^14
    /// 92.6 MB, 1.80 s (the floor moves more often). FLORES-200: 65.4, 60.4,
    /// 58.3 MB; 0.93, 0.86, 0.94 s.
    heap_pairs: usize,
    /// About how many bytes of the word-list arena one pass of
    /// [`Lists::compact`] slides (see there). Merging the 1 GB scale file
    /// (`examples/profile`, peak and merge time, two runs each): one pass
    /// 95.1-95.5 MB, 1.73-1.80 s; 8 MB passes 91.9-92.5 MB, 1.76-1.87 s;
    /// 2 MB passes 90.5-90.9 MB, 1.88-1.95 s. FLORES-200, one pass against
    /// 2 MB passes: 60.3-60.6 against 57.4-57.9 MB, 1.01-1.12 against
    /// 1.02-1.20 s.
    slide_pass: usize,
}

impl Tuning {
    const DEFAULT: Tuning = Tuning { min_slide: 1 << 18, heap_pairs: 1 << 15, slide_pass: 2 << 20 };
}

/// [`learn_merges`] with token ids stored as `S`, which must hold `target - 1`.
fn learn<S: Symbol>(
    counts: ChunkCounts,
    target: usize,
    mut on_merge: impl FnMut(&Merge, usize) -> Result<(), String>,
    tuning: Tuning,
) -> Result<Vec<Merge>, String> {
    let mut words = Words::<S>::new(counts)?;
    let (mut pairs, mut lists) = initial_pairs(&words)?;

    let mut vocab: Vec<Arc<[u8]>> = (0..=255u8).map(|b| Arc::from(&[b][..])).collect();
    let mut ids: FxHashMap<Arc<[u8]>, u32> =
        vocab.iter().enumerate().map(|(i, b)| (b.clone(), i as u32)).collect();

    // The heap holds only the pairs counted at least `floor` times, a floor
    // picked (see `floor_for`) so that about `heap_pairs` pairs are above it;
    // the pair map holds those and the pairs that may still gain occurrences
    // (made by the last merge); the other pairs are cold (see `Cold`). When
    // the heap runs empty, every pair left is below the floor: a lower one is
    // picked, cold pairs that reach it are thawed, and the heap is rebuilt.
    // (Exact: every pair at or above the floor is in the map and has a heap
    // entry, so the top is the winner.)
    //
    // Why not every pair in the heap: on the benchmark's 1 GB scale file
    // every pair occurs at least 4 times (the corpora are repeated), so a
    // floor of 2 kept all 1.1M pairs in the heap, 21 MB, while 50k merges
    // drew from the top few thousand. Pairs that occur once, half of all
    // pairs on multilingual text, never win while one occurring twice
    // exists: the floor is never below 2 while there is one.
    let mut cold = Cold::new();
    let mut floor = i64::MAX;
    // (Reserved for twice the pairs it is built with: see the rebuild below.)
    let reserve = 2 * tuning.heap_pairs.min(words.count()) + 4096;
    let mut heap = PairHeap { items: Vec::with_capacity(reserve), built: 0 };
    // Moves the floor to the one `floor_for` picks now, keeping the rule
    // above: cold pairs that reach a lower floor are thawed; pairs in the map
    // below the new floor go cold; the heap is rebuilt from the map.
    let refloor = |floor: &mut i64,
                   pairs: &mut FxHashMap<Pair<S>, PairInfo>,
                   cold: &mut Cold<S>,
                   lists: &mut Lists,
                   words: &Words<S>,
                   heap: &mut PairHeap<S>,
                   vocab: &[Arc<[u8]>]| {
        let new = floor_for(&histogram(pairs, cold), tuning.heap_pairs);
        if new < *floor {
            let taken = cold.take(class(new), None);
            thaw(taken, new, pairs, cold, lists, words);
        }
        *floor = new;
        pairs.retain(|&p, info| {
            let keep = info.count() >= new;
            if !keep {
                cold.push(p, info.count(), info, lists);
            }
            keep
        });
        if pairs.capacity() > 4 * pairs.len() + 4096 {
            pairs.shrink_to(2 * pairs.len());
        }
        heap.rebuild(vocab, pairs, new);
    };
    refloor(&mut floor, &mut pairs, &mut cold, &mut lists, &words, &mut heap, &vocab);

    let mut merges = Vec::new();
    let mut delta: FxHashMap<Pair<S>, i64> = FxHashMap::default();
    let mut affected: Vec<u32> = Vec::new();
    while vocab.len() < target {
        let Some((count, pair)) = heap.pop(&vocab) else {
            if floor > 1 && !(pairs.is_empty() && cold.is_empty()) {
                // Every pair left is below the floor: the next floor is lower.
                refloor(&mut floor, &mut pairs, &mut cold, &mut lists, &words, &mut heap, &vocab);
                continue;
            }
            break; // corpus exhausted
        };
        let current = pairs.get(&pair).map_or(0, |info| info.count());
        if current < floor {
            continue;
        }
        if current as u64 != count {
            // Stale entry: the pair's count dropped since it was pushed.
            heap.push(&vocab, current as u64, pair);
            continue;
        }

        let mut bytes = vocab[pair.0.id()].to_vec();
        bytes.extend_from_slice(&vocab[pair.1.id()]);
        let new = match ids.get(&bytes[..]) {
            Some(&id) => {
                // Duplicate: same bytes reached by another path. The pairs
                // holding `id` can gain occurrences again: none may stay cold.
                let taken = cold.take(CLASSES, Some(id as usize));
                thaw(taken, 1, &mut pairs, &mut cold, &mut lists, &words);
                id
            }
            None => {
                let id = vocab.len() as u32;
                let bytes: Arc<[u8]> = Arc::from(bytes);
                vocab.push(bytes.clone());
                ids.insert(bytes, id);
                id
            }
        };
        let merge = Merge { left: pair.0.id() as u32, right: pair.1.id() as u32, new };
        on_merge(&merge, vocab.len())?;
        merges.push(merge);
        let new = S::from_id(new);

        // The pair disappears: every occurrence is merged. Its entry goes
        // now; the deltas below bring its count to zero and do not revive it.
        let info = pairs.remove(&pair).expect("popped pairs are present");
        affected.clear();
        lists.read(&info, &mut affected);
        lists.free(&info);

        // `clear()` wipes the map's whole capacity, so a map that grew large
        // is replaced and a small one reused. It is not sized from the number
        // of occurrences: the pairs they change are mostly the same few
        // hundred (on FLORES-200, 66k words gave 311 distinct pairs), and
        // sizing for ~4 per occurrence put 8-30 MB of empty table into the
        // peak during the first merges.
        if delta.capacity() > 4096 {
            delta = FxHashMap::default();
        } else {
            delta.clear();
        }
        // A list may name a word that no longer holds the pair, or rarely
        // a word twice (a token id reused, see `Lists`): `merge_word` then
        // finds nothing, which is cheaper than keeping lists exact.
        for (k, &wi) in affected.iter().enumerate() {
            // The words of a merge lie anywhere in memory, and waiting for
            // each one's record, then its symbols, was most of the loop on
            // large corpora: so the record of the word 8 ahead and the
            // symbols of the word 4 ahead are fetched early (merge loop on
            // FLORES-200 3.4 -> 2.1 s, on 100 MB of English 0.80 -> 0.57 s,
            // in-process A/B; 16/8 ahead measured the same).
            if let Some(&ahead) = affected.get(k + 8) {
                prefetch(&words.meta[ahead as usize]);
            }
            if let Some(&soon) = affected.get(k + 4) {
                prefetch(&words.symbols[words.meta[soon as usize].start as usize]);
            }
            let i = wi as usize;
            let w = &mut words.meta[i];
            let n = w.len as usize;
            let word = &mut words.symbols[w.start as usize..w.start as usize + n];
            let m = merge_word(word, pair, new, w.freq as i64, &mut delta);
            if m < n {
                w.len = m as u32;
                words.live -= n - m;
                for p in new_pairs(&word[..m], new) {
                    lists.push(pairs.entry(p).or_default(), wi)?;
                }
            }
        }
        for (&p, &d) in &delta {
            if d == 0 || p == pair {
                continue;
            }
            if d < 0 {
                // A pair that lost occurrences. A cold one (not in the map)
                // keeps its count as an upper bound. One in the map keeps its
                // heap entry (now too high), which is fixed when popped.
                let Some(info) = pairs.get_mut(&p) else { continue };
                let c = info.count() + d;
                info.set_count(c);
                if c <= 0 {
                    // Gone from every word: its (all stale) word list goes too.
                    let gone = pairs.remove(&p).expect("present");
                    lists.free(&gone);
                }
                continue;
            }
            // A pair this merge made (it holds `new`; the word loop put it
            // in the map) or, after a duplicate, one that gained.
            let info = pairs.get_mut(&p).expect("made by the word loop");
            let c = info.count() + d;
            info.set_count(c);
            if c >= floor {
                heap.push(&vocab, c as u64, p);
            } else {
                // It can only lose occurrences from now on: cold.
                let info = pairs.remove(&p).expect("present");
                cold.push(p, c, &info, &mut lists);
            }
        }
        // Entries pile up: stale ones (a pair pushed again each time its
        // count grows) and new pairs above the floor. When the heap has grown
        // to twice its size at the last rebuild, rebuild it, with a floor
        // picked afresh (higher, if counts above the old one are plenty).
        if heap.items.len() > 2 * heap.built + 4096 {
            refloor(&mut floor, &mut pairs, &mut cold, &mut lists, &words, &mut heap, &vocab);
        }
        lists.compact(&mut pairs, &mut cold, tuning);
        words.compact(tuning.min_slide);
    }
    Ok(merges)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patterns::{GPT2_PATTERN, GPT4O_PATTERN, GPT4_PATTERN};

    /// xorshift64: reproducible pseudo-random numbers for the tests below.
    fn next_random(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    /// `count` groups of 1 to `max_words` of `words`, picked by xorshift from
    /// `seed`, each followed by a space (or, with `newlines`, a newline one
    /// time in 7).
    fn random_text(words: &[&str], count: usize, max_words: u64, mut seed: u64, newlines: bool) -> String {
        let mut text = String::new();
        for _ in 0..count {
            next_random(&mut seed);
            let n = 1 + (seed % max_words) as usize;
            for k in 0..n {
                text.push_str(words[((seed >> (8 * k + 8)) % words.len() as u64) as usize]);
            }
            text.push(if newlines && seed % 7 == 0 { '\n' } else { ' ' });
        }
        text
    }

    fn counts_of(words: &[(&str, u64)]) -> ChunkCounts {
        words.iter().map(|(w, n)| (w.as_bytes().to_vec(), *n)).collect()
    }

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
    fn textbook_example() {
        // "aaabdaaabac" as one chunk, trained to 259 tokens.
        let merges = learn_merges(counts_of(&[("aaabdaaabac", 1)]), 259, |_, _| Ok(())).unwrap();
        let got: Vec<(u32, u32, u32)> = merges.iter().map(|m| (m.left, m.right, m.new)).collect();
        assert_eq!(got, vec![(97, 97, 256), (97, 98, 257), (256, 257, 258)]);
    }

    #[test]
    fn ties_go_to_the_smallest_bytes() {
        // "ab" and "cd" both occur twice; "ab" < "cd".
        let merges = learn_merges(counts_of(&[("cd", 2), ("ab", 2)]), 257, |_, _| Ok(())).unwrap();
        assert_eq!(merges, vec![Merge { left: b'a' as u32, right: b'b' as u32, new: 256 }]);
    }

    #[test]
    fn pairs_occurring_once_merge_last_in_byte_order() {
        // "xy" occurs twice and goes first; then only pairs occurring once are
        // left ((x y)(x y) -> (xy, xy), and (a, b)): the heap, which holds
        // pairs occurring twice or more, runs empty and is rebuilt with them.
        let merges = learn_merges(counts_of(&[("xyxy", 1), ("ab", 1)]), 1000, |_, _| Ok(())).unwrap();
        let got: Vec<(u32, u32, u32)> = merges.iter().map(|m| (m.left, m.right, m.new)).collect();
        assert_eq!(got, vec![(120, 121, 256), (97, 98, 257), (256, 256, 258)]);
    }

    #[test]
    fn counts_beyond_32_bits_add_up() {
        // Each chunk becomes several words of at most u32::MAX; their counts
        // must add up: "ab" (2^33 + 1) beats "cd" (2^33), which beats "ef"
        // (2^32 + 7, more than a u32 holds).
        let counts = counts_of(&[("cd", 1 << 33), ("ef", (1 << 32) + 7), ("ab", (1 << 33) + 1)]);
        let merges = learn_merges(counts, 259, |_, _| Ok(())).unwrap();
        let got: Vec<(u32, u32)> = merges.iter().map(|m| (m.left, m.right)).collect();
        assert_eq!(got, vec![(97, 98), (99, 100), (101, 102)]);
    }

    #[test]
    fn stops_when_the_corpus_is_exhausted() {
        let merges = learn_merges(counts_of(&[("ab", 5)]), 1000, |_, _| Ok(())).unwrap();
        assert_eq!(merges.len(), 1);
    }

    #[test]
    fn u16_and_u32_symbols_learn_the_same_merges() {
        // Varied text (multi-byte letters, digits, punctuation), so that
        // thousands of merges happen and ties are broken by bytes.
        const WORDS: &[&str] = &["the", "a", "é", "日本", "ж", "1", "42", "x", "'s", "!", "\n", "qu", "ü", "🙂"];
        let text = random_text(WORDS, 60_000, 4, 0x9e3779b97f4a7c15, false);
        let s = Splitter::new(GPT4_PATTERN).unwrap();
        let counts = count_documents(&s, &[&text]).unwrap();
        let narrow = learn::<u16>(counts.clone(), 3000, |_, _| Ok(()), Tuning::DEFAULT).unwrap();
        let wide = learn::<u32>(counts.clone(), 3000, |_, _| Ok(()), Tuning::DEFAULT).unwrap();
        assert!(narrow.len() > 1000, "{}", narrow.len());
        assert_eq!(narrow, wide);
        // Sliding the words and lists down whenever a quarter is unused, at
        // any size, in passes of ~3000 bytes, changes nothing.
        let sliding = Tuning { min_slide: 0, slide_pass: 3000, ..Tuning::DEFAULT };
        let sliding = learn::<u16>(counts, 3000, |_, _| Ok(()), sliding).unwrap();
        assert_eq!(narrow, sliding);
    }

    #[test]
    fn a_heap_of_few_pairs_learns_what_a_heap_of_all_pairs_learns() {
        // With a heap of a few pairs, the floor moves all the time: pairs go
        // cold and are thawed (recounted from their words) over and over.
        // The merges must be those of a heap holding every pair counted twice
        // or more (the floor stays at 2 until it drops to 1). (A merge that
        // reuses an id, whose cold pairs would be thawed too, cannot happen
        // in training: see test_reference.py,
        // `test_duplicate_merge_reuses_existing_id`.)
        const WORDS: &[&str] =
            &["the", "then", "he", "hen", "é", "日本", "本日", "ж", "1", "42", "x", "'s", "!", "ab", "abc", "bc"];
        let text = random_text(WORDS, 40_000, 5, 0x51afd7ed558ccd25, true);
        let s = Splitter::new(GPT4_PATTERN).unwrap();
        let counts = count_documents(&s, &[&text]).unwrap();
        let all = Tuning { heap_pairs: usize::MAX, ..Tuning::DEFAULT };
        let expected = learn::<u16>(counts.clone(), 5000, |_, _| Ok(()), all).unwrap();
        assert!(expected.len() > 2000, "{}", expected.len());
        for heap_pairs in [1, 7, 64, 1000] {
            let tuning = Tuning { heap_pairs, min_slide: 0, slide_pass: 1 << (heap_pairs % 17) };
            let got = learn::<u16>(counts.clone(), 5000, |_, _| Ok(()), tuning).unwrap();
            assert_eq!(got, expected, "heap of {heap_pairs} pairs");
        }
    }

    #[test]
    fn word_lists_survive_growth_death_and_sliding() {
        // Lists of every length (inline, moved to the arena, grown there),
        // some freed, checked against plain vectors after every slide. The
        // words come in four kinds of order: repeated (each pushed many times
        // in a row: named once), small gaps (one-byte varints), large gaps
        // (three bytes), and any id in any order (the escape, five bytes).
        let mut pairs: FxHashMap<Pair<u16>, PairInfo> = FxHashMap::default();
        let mut model: FxHashMap<Pair<u16>, Vec<u32>> = FxHashMap::default();
        let mut lists = Lists { arena: Vec::new(), dead: 0 };
        let mut seed = 0x2545f4914f6cdd1du64;
        let (mut slides, mut escapes) = (0, 0);
        for round in 0..400u32 {
            for _ in 0..2000 {
                next_random(&mut seed);
                // Skewed keys: a few long lists, many short ones.
                let k = ((seed % 1000) * (seed >> 32) % 1000 / 7) as u16;
                let key = (k, round as u16 % 3);
                let word = match k % 4 {
                    0 => round,
                    1 => round * 16 + (seed >> 20) as u32 % 16,
                    2 => round * 70_000,
                    _ => (seed >> 24) as u32 % (u32::MAX - 1),
                };
                let list = model.entry(key).or_default();
                if list.last().is_some_and(|&w| w > word) {
                    escapes += 1;
                }
                if list.last() != Some(&word) {
                    list.push(word);
                }
                lists.push(pairs.entry(key).or_default(), word).unwrap();
            }
            // Every third round, a third of the pairs die.
            if round % 3 == 2 {
                let doomed: Vec<_> = pairs.keys().copied().filter(|p| (p.0 as u32 + round) % 3 == 0).collect();
                for p in doomed {
                    lists.free(&pairs.remove(&p).unwrap());
                    model.remove(&p);
                }
            }
            let dead = lists.dead;
            // Slides in one pass or in passes of a few lists (1 to 64 KB).
            let slide_pass = if round % 2 == 0 { usize::MAX } else { 1 << (round % 17) };
            lists.compact(&mut pairs, &mut Cold::new(), Tuning { slide_pass, ..Tuning::DEFAULT });
            if lists.dead < dead {
                slides += 1;
                let in_arena: usize = pairs.values().filter(|i| i.in_arena()).map(PairInfo::len).sum();
                assert_eq!((lists.dead, lists.arena.len()), (0, in_arena));
            }
            assert_eq!(pairs.len(), model.len());
            for (p, words) in &model {
                let mut got = Vec::new();
                lists.read(&pairs[p], &mut got);
                assert_eq!(got, *words, "{p:?} after round {round}");
            }
        }
        assert!(slides > 3, "{slides} slides: the test no longer exercises sliding");
        assert!(escapes > 1000, "{escapes} ids out of order: the test no longer exercises the escape");
    }

    /// Temporary files holding `texts`, removed when dropped.
    struct TempFiles(Vec<std::path::PathBuf>);

    impl TempFiles {
        fn new(name: &str, texts: &[&[u8]]) -> TempFiles {
            let dir = std::env::temp_dir().join(format!("bpe-train-{name}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            TempFiles(
                texts
                    .iter()
                    .enumerate()
                    .map(|(i, t)| {
                        let path = dir.join(format!("{i}.txt"));
                        std::fs::write(&path, t).unwrap();
                        path
                    })
                    .collect(),
            )
        }
    }

    impl Drop for TempFiles {
        fn drop(&mut self) {
            if let Some(dir) = self.0.first().and_then(|p| p.parent()) {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }

    /// Files streamed in reads of a few bytes to 4 KB, on 1 to 3 counting
    /// threads that add to the total every few bytes or only at the end,
    /// count what each file counts as one document, and report every byte.
    #[test]
    fn streamed_files_count_like_whole_documents() {
        let words = ["The", " fox", "\n", "\n\n", " 日本語", "é", "  ", "123", "'s", "!", "\t", "ǅx", " ", "\r\n"];
        let texts = [random_text(&words, 3000, 5, 7, true), String::new(), random_text(&words, 500, 3, 11, false)];
        let files = TempFiles::new("stream", &texts.iter().map(|t| t.as_bytes()).collect::<Vec<_>>());
        for pattern in [GPT2_PATTERN, GPT4_PATTERN, GPT4O_PATTERN] {
            let s = Splitter::new(pattern).unwrap();
            let mut expected = ChunkCounts::default();
            for t in &texts {
                count_chunks(&s, t, &mut expected).unwrap();
            }
            for threads in 1..=3 {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                for sizes in [(1, 1), (7, 50), (100, 1000), (4096, usize::MAX)] {
                    let mut reported = 0;
                    let got = pool.install(|| {
                        count_files_in(&|t, c| count_chunks(&s, t, c), &files.0, sizes, |n| {
                            reported += n;
                            Ok(())
                        })
                    });
                    let total: usize = texts.iter().map(String::len).sum();
                    assert_eq!(got.unwrap(), expected, "{pattern} threads {threads} sizes {sizes:?}");
                    assert_eq!(reported, total as u64);
                }
            }
        }
    }

    /// A bad byte deep in a file (or a character cut off at its end) is
    /// named by its file offset, however the file was cut; an error from
    /// `on_bytes` (Ctrl-C) stops the count with that error.
    #[test]
    fn streamed_files_report_bad_bytes_and_stop_on_request() {
        let s = Splitter::new(GPT4_PATTERN).unwrap();
        let count = |t: &str, c: &mut ChunkCounts| count_chunks(&s, t, c);
        let good = random_text(&["one", " two", "\n", "3"], 400, 4, 5, true);
        let mut bad = good.clone().into_bytes();
        bad.insert(1234, 0xff);
        let mut cut_off = good.clone().into_bytes();
        cut_off.extend_from_slice(&"日".as_bytes()[..2]);
        let files = TempFiles::new("bad", &[good.as_bytes(), &bad, &cut_off]);
        for sizes in [(3, 1), (64, 100), (1 << 20, usize::MAX)] {
            for (path, at) in [(&files.0[1], 1234), (&files.0[2], good.len())] {
                let err = count_files_in(&count, &[files.0[0].clone(), path.clone()], sizes, |_| Ok(())).unwrap_err();
                let expected = format!("{} is not valid UTF-8 at byte offset {at} (line ", path.display());
                assert!(err.starts_with(&expected), "{err}");
            }
            let mut calls = 0;
            let err = count_files_in(&count, &files.0[..1], sizes, |_| {
                calls += 1;
                if calls == 2 {
                    Err("interrupted".to_string())
                } else {
                    Ok(())
                }
            });
            if good.len() > sizes.0 {
                assert_eq!(err, Err("interrupted".to_string()), "sizes {sizes:?}");
            }
        }
    }

    /// When counting a segment fails or panics, on any number of threads:
    /// the count stops (no thread left waiting), with the error of the first
    /// failing segment in file order, or with the panic itself.
    #[test]
    fn streamed_counting_stops_on_a_failure_or_a_panic() {
        let text: String = (0..2000).map(|i| format!("line {i}\n")).collect();
        let files = TempFiles::new("fail", &[text.as_bytes()]);
        let fail = |t: &str, _: &mut ChunkCounts| match ["line 1000\n", "line 1500\n"].iter().find(|l| t.contains(*l)) {
            Some(l) => Err(format!("failed at {}", l.trim())),
            None => Ok(()),
        };
        let panic = |t: &str, _: &mut ChunkCounts| {
            assert!(!t.contains("line 1500\n"), "deliberate panic");
            Ok(())
        };
        for threads in 1..=3 {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            for read in [10, 100, 1000] {
                let got = pool.install(|| count_files_in(&fail, &files.0, (read, 100), |_| Ok(())));
                assert_eq!(got, Err("failed at line 1000".to_string()), "threads {threads} read {read}");
                let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    pool.install(|| count_files_in(&panic, &files.0, (read, 100), |_| Ok(())))
                }));
                let payload = caught.expect_err("the panic is handed on");
                let message = payload
                    .downcast_ref::<&str>()
                    .copied()
                    .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or_default();
                assert!(message.contains("deliberate panic"), "{message:?}");
            }
        }
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
}
