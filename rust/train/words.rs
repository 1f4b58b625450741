//! The words of the merge loop: every distinct chunk as its list of token
//! ids, in one flat buffer, and how a merge rewrites a word.

use rustc_hash::FxHashMap;

use super::count::Source;

/// A token id inside the merge loop: `u16` while the vocabulary fits in 16
/// bits (targets up to 65,536 tokens: GPT-2's 50k and most trained
/// vocabularies), else `u32`: the word buffer is the loop's largest array,
/// and heap entries shrink with it (docs/dev/performance.md, "Symbols").
pub(super) trait Symbol: Copy + Eq + std::hash::Hash + Send + Sync + 'static {
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

pub(super) type Pair<S> = (S, S);

/// No word (in a cold pair's second inline slot, see `cold.rs`). Word ids are
/// below it (see `Words::new`), and it does not have the arena bit
/// (`occurrences::IN_ARENA`, 1 << 31) set.
pub(super) const NO_WORD: u32 = (1 << 31) - 1;

/// Replaces every non-overlapping (left to right) occurrence of `pair` in
/// `word` by `new`, in place; returns the new length (shorter iff it merged)
/// and leaves in `made` where `new` went (in the new word, in order).
pub(super) fn merge_word<S: Symbol>(
    word: &mut [S],
    pair: Pair<S>,
    new: S,
    f: i64,
    delta: &mut FxHashMap<Pair<S>, i64>,
    made: &mut Vec<u32>,
) -> usize {
    // In place (the output never overtakes the input), and only the pairs
    // around each occurrence change: with x a b y -> x N y, the pairs (x,a),
    // (a,b), (b,y) lose `f` and (x,N), (N,y) gain it. `x` is read from the
    // output, so back-to-back occurrences (a b a b -> N N) come out right:
    // the (N,a) added by the first is removed by the second.
    // (Subtracting all of a word's pairs and adding them back after the merge
    // is simpler but does twice the hash updates, and this loop dominates
    // the first merges, which touch a large share of all words.)
    //
    // From one occurrence to the next nothing is looked at twice: the
    // symbols between are found by a search that stores nothing and moved
    // in one `copy_within`, and where `new` went is noted in `made`, so that
    // the new pairs need no second scan (`pairs_at`). SuperBPE's second
    // stage merges inside sentence-long words, where a loop that copied and
    // then rescanned every symbol was most of the merge loop's time.
    let (a, b) = pair;
    let n = word.len();
    made.clear();
    let Some(mut i) = find_pair(word, 0, pair) else {
        return n;
    };
    let mut out = i;
    loop {
        // word[i], word[i + 1] are (a, b), and out <= i.
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
        made.push(out as u32);
        out += 1;
        i += 2;
        let next = find_pair(word, i, pair).unwrap_or(n);
        word.copy_within(i..next, out);
        out += next - i;
        if next == n {
            break;
        }
        i = next;
    }
    *delta.entry(pair).or_insert(0) -= made.len() as i64 * f;
    out
}

/// The first place at or after `from` where `pair` occurs in `word`.
///
/// Sixteen places at a time, with no branch inside a block (the compiler
/// makes it a few vector compares): stage 2's words run to hundreds of
/// symbols, most of them passed over.
#[inline]
fn find_pair<S: Symbol>(word: &[S], from: usize, (a, b): Pair<S>) -> Option<usize> {
    const BLOCK: usize = 16;
    let mut i = from;
    while i + BLOCK < word.len() {
        let (left, right) = (&word[i..i + BLOCK], &word[i + 1..i + BLOCK + 1]);
        let mut any = false;
        for k in 0..BLOCK {
            any |= (left[k] == a) & (right[k] == b);
        }
        if any {
            break;
        }
        i += BLOCK;
    }
    let tail = word.get(i..)?;
    tail.windows(2).position(|w| w[0] == a && w[1] == b).map(|k| i + k)
}

/// The pairs of `word` that hold `new`: after a merge, the only pairs new to it.
pub(super) fn new_pairs<S: Symbol>(word: &[S], new: S) -> impl Iterator<Item = Pair<S>> + '_ {
    word.windows(2).filter(move |p| p[0] == new || p[1] == new).map(|p| (p[0], p[1]))
}

/// [`new_pairs`] for a `new` that no word held before the merge: then it is
/// only where the merge put it (`made`, in order), and the pairs come in the
/// same order, each once, without a scan of the word.
pub(super) fn pairs_at<'w, S: Symbol>(word: &'w [S], made: &'w [u32]) -> impl Iterator<Item = Pair<S>> + 'w {
    let mut last = usize::MAX; // the last window given
    made.iter().flat_map(move |&q| {
        let q = q as usize;
        let left = (q > 0 && last != q - 1).then(|| (word[q - 1], word[q]));
        let right = (q + 1 < word.len()).then(|| (word[q], word[q + 1]));
        if right.is_some() {
            last = q;
        }
        left.into_iter().chain(right)
    })
}

/// All words in one flat buffer: word `i` is `symbols[w.start..w.start + w.len]`
/// with `w = meta[i]`; merging shrinks `w.len` in place and leaves the tail
/// unused, until [`Words::compact`] slides the words down over the unused
/// symbols.
///
/// Why flat: a `Vec<Vec<u32>>` costs each word a 24-byte header and a heap
/// block of its own, and scatters words over the heap. Start, length and
/// count sit together in one record because a merge visits its words in no
/// useful order, and separate arrays cost a cache miss each (see
/// docs/dev/performance.md, "Words").
pub(super) struct Words<S> {
    pub(super) symbols: Vec<S>,
    pub(super) meta: Vec<Word>,
    /// The symbols in use: the sum of the words' lengths.
    pub(super) live: usize,
}

/// 12 bytes: the count is a `u32`, and a chunk counted more often than that
/// (only in corpora of tens of GB) becomes several words with the same bytes,
/// whose counts add up to its own: every pair count, and so every merge, is
/// the same. (With a `u64` count the record would take 16 bytes.)
#[derive(Clone, Copy)]
pub(super) struct Word {
    pub(super) freq: u32,
    pub(super) start: u32,
    pub(super) len: u32,
}

/// How many words a chunk counted `freq` times becomes (see [`Word`]).
pub(super) fn pieces(freq: u64) -> usize {
    freq.div_ceil(u64::from(u32::MAX)) as usize
}

impl<S: Symbol> Words<S> {
    /// The words of `counts`, each starting as its bytes (training from scratch).
    pub(super) fn new(counts: impl Source) -> Result<Words<S>, String> {
        let mut w = Words::sized(counts.bound())?;
        counts.drain_into(&mut |bytes, freq| {
            if bytes.len() >= 2 {
                let first = w.symbols.len();
                w.symbols.extend(bytes.iter().map(|&b| S::from_id(u32::from(b))));
                w.push(first, freq);
            }
            Ok(())
        })?;
        w.live = w.symbols.len();
        Ok(w)
    }

    /// The words of `counts`, each starting as the ids a base vocabulary
    /// encodes it to (extending one; never more symbols than its bytes):
    /// `make` gives each thread an encoder that appends a chunk's ids.
    ///
    /// Why on all threads: SuperBPE's second stage encodes nearly its whole
    /// corpus here (its chunks are sentences, few of them repeated): on 1 GB,
    /// 3.6M chunks and 165M symbols, 12 s on one core. The chunks go in
    /// batches of about `batch` bytes per thread, each thread encoding a
    /// stretch of the batch with its own encoder (and its cache), and the
    /// words are appended in the order of `counts`, so that nothing depends
    /// on the number of threads.
    ///
    /// `between` runs on the calling thread before each batch (the batches
    /// go to the pool one by one): an error from it (Ctrl-C) stops the
    /// encoding, and is returned.
    pub(super) fn new_with<E>(
        counts: impl Source,
        make: impl Fn() -> E + Sync,
        batch: usize,
        mut between: impl FnMut() -> Result<(), String>,
    ) -> Result<Words<S>, String>
    where
        E: FnMut(&[u8], &mut Vec<S>) + Send,
    {
        let mut w = Words::sized(counts.bound())?;
        let threads = crate::threads::current_num_threads().max(1);
        let mut encoders: Vec<E> = (0..threads).map(|_| make()).collect();
        let mut chunks = Batch::default();
        counts.drain_into(&mut |bytes, freq| {
            if bytes.len() >= 2 {
                chunks.push(bytes, freq);
                if chunks.bytes.len() >= batch * threads {
                    between()?;
                    w.encode_batch(&mut chunks, &mut encoders);
                }
            }
            Ok(())
        })?;
        w.encode_batch(&mut chunks, &mut encoders);
        w.live = w.symbols.len();
        Ok(w)
    }

    /// Words of the symbols and counts that `parts` gives its callback, in
    /// order (see `cut.rs`), each of two symbols or more, `n` words of
    /// `total` symbols in all (as `count::add_bound` counts them); `None` if
    /// they are more than word ids can number (see [`Words::sized`]). (The
    /// pieces are made on the fly, not held twice.)
    pub(super) fn of_pieces(
        (n, total): (usize, usize),
        parts: impl FnOnce(&mut dyn FnMut(&[S], u64)),
    ) -> Option<Words<S>> {
        let mut w = Words::sized((n, total)).ok()?;
        parts(&mut |piece, freq| {
            debug_assert!(piece.len() >= 2);
            let first = w.symbols.len();
            w.symbols.extend_from_slice(piece);
            w.push(first, freq);
        });
        debug_assert_eq!((w.meta.len(), w.symbols.len()), (n, total));
        w.live = w.symbols.len();
        Some(w)
    }

    /// Empty words with room for `n` chunks of two bytes or more and
    /// `total` bytes ([`Source::bound`]; bytes are an upper bound on their
    /// symbols, so the buffers never double while filling); words of one
    /// symbol have no pairs and can never change, and are never added.
    fn sized((n, total): (usize, usize)) -> Result<Words<S>, String> {
        // Word ids and offsets are u32 (they fill the per-pair word lists),
        // and ids stay below `NO_WORD` (see `ColdPair`).
        if n >= NO_WORD as usize || total > u32::MAX as usize {
            return Err(format!(
                "too many distinct chunks to train on ({n}, {total} bytes; at most 2G chunks and 4G bytes): \
                 train on a sample of the corpus"
            ));
        }
        Ok(Words { symbols: Vec::with_capacity(total), meta: Vec::with_capacity(n), live: 0 })
    }

    /// Adds the word whose symbols were just appended from `first` on,
    /// counted `freq` times (dropped if it has fewer than two symbols).
    fn push(&mut self, first: usize, mut freq: u64) {
        let len = self.symbols.len() - first;
        if len < 2 {
            self.symbols.truncate(first);
            return;
        }
        let mut at = first;
        loop {
            let part = freq.min(u64::from(u32::MAX));
            freq -= part;
            self.meta.push(Word { start: at as u32, freq: part as u32, len: len as u32 });
            if freq == 0 {
                break;
            }
            // A chunk counted more than a u32 holds: another copy.
            at = self.symbols.len();
            self.symbols.extend_from_within(first..first + len);
        }
    }

    /// Encodes the chunks of `chunks` (emptied), a stretch of about equal
    /// bytes per encoder on its own thread of this process's pool
    /// (`threads::install`), and adds their words in order.
    fn encode_batch<E>(&mut self, chunks: &mut Batch, encoders: &mut [E])
    where
        E: FnMut(&[u8], &mut Vec<S>) + Send,
    {
        use rayon::prelude::*;
        let n = chunks.freqs.len();
        if n == 0 {
            return;
        }
        // Stretch k ends at the first chunk ending past k/threads of the bytes.
        let per = chunks.bytes.len().div_ceil(encoders.len());
        let mut bounds = vec![0];
        for k in 1..encoders.len() {
            let at = chunks.ends.partition_point(|&e| e < k * per);
            bounds.push(at.clamp(*bounds.last().expect("not empty"), n));
        }
        bounds.push(n);
        let batch = &*chunks;
        let encoded: Vec<(Vec<S>, Vec<u32>)> = crate::threads::install(|| {
            encoders
                .par_iter_mut()
                .enumerate()
                .map(|(k, encode)| {
                    let (mut symbols, mut lens) = (Vec::new(), Vec::with_capacity(bounds[k + 1] - bounds[k]));
                    for i in bounds[k]..bounds[k + 1] {
                        let before = symbols.len();
                        encode(batch.chunk(i), &mut symbols);
                        lens.push((symbols.len() - before) as u32);
                    }
                    (symbols, lens)
                })
                .collect()
        });
        let mut i = 0;
        for (symbols, lens) in encoded {
            let mut from = 0;
            for len in lens {
                let first = self.symbols.len();
                self.symbols.extend_from_slice(&symbols[from..from + len as usize]);
                from += len as usize;
                self.push(first, chunks.freqs[i]);
                i += 1;
            }
        }
        chunks.clear();
    }

    pub(super) fn word(&self, i: usize) -> &[S] {
        let w = self.meta[i];
        &self.symbols[w.start as usize..(w.start + w.len) as usize]
    }

    pub(super) fn count(&self) -> usize {
        self.meta.len()
    }

    /// When a quarter of the buffer is unused, slides the words down over
    /// the unused symbols, in order, and gives the freed end back to the OS.
    ///
    /// Merging shortens words fast at first: on the benchmark's scale file
    /// (1.33M words), 13.4M symbols were 7.5M after 2,000 merges and 4.4M
    /// after 49,000, while the buffer kept its first size. A slide is one
    /// pass over the buffer, a few times in a whole training.
    pub(super) fn compact(&mut self, min_bytes: usize) {
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

/// Gives the memory pages of `v`'s spare capacity back to the OS (Linux;
/// elsewhere they stay resident until `v` is freed).
pub(super) fn release_spare<T: Copy>(v: &Vec<T>) {
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

/// Chunks waiting to be encoded (see [`Words::new_with`]): their bytes one
/// after another, where each ends, and their counts.
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    freqs: Vec<u64>,
}

impl Batch {
    fn push(&mut self, chunk: &[u8], freq: u64) {
        self.bytes.extend_from_slice(chunk);
        self.ends.push(self.bytes.len());
        self.freqs.push(freq);
    }

    fn chunk(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
        self.freqs.clear();
    }
}

// The words of counts by ids, read on all threads.
#[path = "words_keys.rs"]
mod keys;

#[cfg(test)]
#[path = "words_tests.rs"]
mod tests;
