//! Step 2 of encoding a chunk (see `encode/mod.rs`): merging its parts,
//! lowest rank first, until no adjacent pair is a token. Two implementations
//! with the same result: a scan for short chunks and a heap for long ones.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::chars::Chars;
use super::pairs::Pairs;
use crate::vocab::{Rank, Vocab, NONE};

/// Chunks longer than this many bytes use the heap merge. (Also the size of
/// the scan's stack arrays, and small enough that offsets fit in a `u8`.)
pub(super) const LONG_CHUNK: usize = 128;

/// The whole character or pair that may start at `chunk[i]`, if any: the
/// encoder's start for a chunk with characters. (`chars` must not be empty.)
#[inline(always)]
pub(super) fn whole_at(vocab: &Vocab, chars: &Chars, pairs: &Pairs, chunk: &[u8], i: usize) -> Option<(Rank, usize)> {
    // (Bytes below 0xC2 start no character.)
    if chunk[i] >= 0xC2 {
        chars.whole(chunk, i)
    } else {
        pairs.whole(vocab, chunk, i)
    }
}

/// The O(n²) merge for short chunks (1 to `LONG_CHUNK` bytes).
/// Calls `emit(start, end, rank)` for each final part, left to right.
///
/// Everything lives in fixed arrays on the stack (no allocation per chunk),
/// and each part carries its rank, so the result needs no final look-ups: a
/// merged part's id is the rank of the pair that made it.
///
/// `start(i)` says if a part of more than one byte starts at `chunk[i]`: its
/// rank and length (a whole character or pair, see `chars.rs` and
/// `pairs.rs`); other parts start as single bytes. (Merge recovery starts
/// from bytes alone: it replays BPE with only some of the tokens, for which
/// those tables were not made.)
pub(super) fn merge_with_scan(
    vocab: &Vocab,
    chunk: &[u8],
    limit: Rank,
    start: impl Fn(usize) -> Option<(Rank, usize)>,
    emit: &mut impl FnMut(usize, usize, Rank),
) {
    // Most chunks that need merging are short (12 bytes on average on FLORES):
    // arrays sized for them are cheaper to set up than ones for LONG_CHUNK.
    if chunk.len() <= 32 {
        scan::<32>(vocab, chunk, limit, start, emit)
    } else {
        scan::<LONG_CHUNK>(vocab, chunk, limit, start, emit)
    }
}

/// [`merge_with_scan`] for chunks of at most `N` bytes.
///
/// Parts are named by the offset where they start, and merged parts are not
/// removed from the arrays: the part after a merge's right half is linked to
/// its left half (`next`, `prev`), and the right half's pair slot becomes
/// `NONE`, so the scan for the lowest rank skips it. An earlier version kept
/// the parts packed, shifting three arrays left after each merge: three
/// `memmove` calls per merge were 8% of encoding FLORES-200 with o200k.
#[inline(always)]
fn scan<const N: usize>(
    vocab: &Vocab,
    chunk: &[u8],
    limit: Rank,
    start: impl Fn(usize) -> Option<(Rank, usize)>,
    emit: &mut impl FnMut(usize, usize, Rank),
) {
    let n = chunk.len();
    debug_assert!((1..=N).contains(&n) && N <= LONG_CHUNK);
    // Part i is chunk[i..next[i]] with id rank[i]; prev[i] is the start of
    // the part before it; pair[i] is the rank of merging part i with the
    // next part (NONE if there is no next part or i no longer starts one).
    let mut next = [0u8; N];
    let mut prev = [0u8; N];
    let mut rank = [NONE; N];
    let mut pair = [NONE; N];
    // The parts `start` allows, and single bytes.
    let (mut i, mut before) = (0, 0);
    while i < n {
        let (r, k) = start(i).unwrap_or((vocab.byte[chunk[i] as usize], 1));
        next[i] = (i + k) as u8;
        prev[i] = before as u8;
        rank[i] = r;
        before = i;
        i += k;
    }
    // A pair of two bytes is in the pair table; others take a look-up.
    let mut i = 0;
    while (next[i] as usize) < n {
        let j = next[i] as usize;
        let end = next[j] as usize;
        let r = if end == i + 2 { vocab.pair_rank(chunk[i], chunk[i + 1]) } else { vocab.get_joined(&chunk[i..end]) };
        pair[i] = if r < limit { r } else { NONE };
        i = j;
    }
    loop {
        // Leftmost lowest rank; slots in offset order are parts in text order.
        let (best, i) = leftmost_min(&pair, n - 1);
        if best == NONE {
            break;
        }
        // Parts i and j become part i; the part after them (if any) and the
        // part before (if any) see a new neighbour.
        let j = next[i] as usize;
        let after = next[j] as usize;
        rank[i] = best;
        next[i] = after as u8;
        pair[j] = NONE;
        pair[i] = if after < n {
            prev[after] = i as u8;
            vocab.get_joined_below(&chunk[i..next[after] as usize], limit)
        } else {
            NONE
        };
        if i > 0 {
            let p = prev[i] as usize;
            pair[p] = vocab.get_joined_below(&chunk[p..after], limit);
        }
    }
    let mut i = 0;
    while i < n {
        emit(i, next[i] as usize, rank[i]);
        i = next[i] as usize;
    }
}

/// The lowest of `pair[..len]` and the first slot that holds it (`NONE` if
/// every slot does).
///
/// For the 128-slot arrays (chunks of 33 to 128 bytes: CJK text, whose
/// chunks are whole clauses) four slots at a time in SSE2, with no branch on
/// the ranks; for short chunks, a loop. Long scans mispredict the loop's
/// `if r < best` where ranks fall in no order (the SSE2 scan made CJK's
/// merges ~4% faster); short ones predict it, and the CPU then starts the
/// next merge's look-ups before the minimum is known, which the branch-free
/// scan's data dependency forbids (English's merges ~4% slower with it).
#[inline(always)]
fn leftmost_min<const N: usize>(pair: &[Rank; N], len: usize) -> (Rank, usize) {
    #[cfg(target_arch = "x86_64")]
    if N > 32 {
        return leftmost_min_sse2(pair, len);
    }
    // Strict `<` keeps the first minimum.
    let (mut best, mut i) = (NONE, 0);
    for (k, &r) in pair[..len].iter().enumerate() {
        if r < best {
            best = r;
            i = k;
        }
    }
    (best, i)
}

/// [`leftmost_min`] in SSE2: the minimum of the vectors of four slots, then
/// the first slot equal to it. The slots from `len` up to the next multiple
/// of 4 must hold `NONE` (every load reads four slots; the scan's arrays
/// start as `NONE`).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn leftmost_min_sse2<const N: usize>(pair: &[Rank; N], len: usize) -> (Rank, usize) {
    use std::arch::x86_64::*;
    const { assert!(N % 4 == 0) };
    assert!(len <= N);
    debug_assert!(pair[len..len.next_multiple_of(4)].iter().all(|&r| r == NONE));
    // SAFETY: SSE2 is part of x86-64; slot 4k + 3 is in the array for every
    // k below len / 4 rounded up (N is a multiple of 4, and len <= N).
    unsafe {
        let at = |k: usize| _mm_loadu_si128(pair.as_ptr().add(4 * k) as *const __m128i);
        // The lower of two vectors, lane by lane: ranks compared as signed
        // after flipping their top bit (SSE2 has no unsigned compare of 32-bit
        // lanes), so NONE stays the highest.
        let flip = _mm_set1_epi32(i32::MIN);
        let lower = |a: __m128i, b: __m128i| {
            let b_lower = _mm_cmpgt_epi32(a, b);
            _mm_or_si128(_mm_and_si128(b_lower, b), _mm_andnot_si128(b_lower, a))
        };
        let mut low = _mm_xor_si128(at(0), flip);
        for k in 1..len.div_ceil(4) {
            low = lower(low, _mm_xor_si128(at(k), flip));
        }
        // The lowest of the four lanes, in every lane.
        low = lower(low, _mm_shuffle_epi32::<0b01_00_11_10>(low));
        low = lower(low, _mm_shuffle_epi32::<0b10_11_00_01>(low));
        let best = _mm_cvtsi128_si32(low) as u32 ^ 0x8000_0000;
        if best == NONE {
            return (NONE, 0);
        }
        let want = _mm_xor_si128(low, flip);
        let mut k = 0;
        loop {
            let hits = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(at(k), want)));
            if hits != 0 {
                return (best, 4 * k + hits.trailing_zeros() as usize);
            }
            k += 1;
        }
    }
}

/// The O(n log n) merge for long chunks: a doubly linked list of parts and a
/// min-heap of (rank, position) with lazy deletion. Same result as the scan:
/// the heap orders equal ranks by position, i.e. leftmost first.
pub(super) fn merge_with_heap(vocab: &Vocab, chunk: &[u8], limit: Rank, emit: &mut impl FnMut(usize, usize, Rank)) {
    merge_with_heap_drawing(vocab, chunk, limit, || true, emit)
}

/// [`merge_with_heap`] where each merge the heap offers is made only if
/// `draw()` says so (BPE-dropout, `extra.rs`): a candidate refused is set
/// aside, and after the next merge the ones set aside go back (candidates
/// of the next step, drawn again). When every candidate left is refused,
/// the merging ends.
pub(super) fn merge_with_heap_drawing(
    vocab: &Vocab,
    chunk: &[u8],
    limit: Rank,
    mut draw: impl FnMut() -> bool,
    emit: &mut impl FnMut(usize, usize, Rank),
) {
    let n = chunk.len();
    // Parts are identified by their start offset; next[i] is the start of the
    // following part (n at the end), prev[i] the previous one.
    let mut next: Vec<usize> = (1..=n).collect();
    let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
    let mut alive = vec![true; n];
    // id[i]: the id of part i; rank[i]: rank of merging part i with its next part.
    let mut id: Vec<Rank> = chunk.iter().map(|&b| vocab.byte[b as usize]).collect();
    let mut rank: Vec<Rank> =
        (0..n).map(|i| if i + 2 <= n { vocab.get_below(&chunk[i..i + 2], limit) } else { NONE }).collect();
    let mut heap: BinaryHeap<Reverse<(Rank, usize)>> =
        rank.iter().enumerate().filter(|&(_, &r)| r != NONE).map(|(i, &r)| Reverse((r, i))).collect();
    let pair_rank = |next: &[usize], i: usize| -> Rank {
        let j = next[i];
        if j >= n {
            return NONE;
        }
        vocab.get_joined_below(&chunk[i..next[j]], limit)
    };
    let mut refused: Vec<Reverse<(Rank, usize)>> = Vec::new();
    while let Some(Reverse((r, i))) = heap.pop() {
        if !alive[i] || rank[i] != r {
            continue; // stale
        }
        if !draw() {
            refused.push(Reverse((r, i)));
            continue;
        }
        let j = next[i];
        alive[j] = false;
        id[i] = r;
        next[i] = next[j];
        if next[i] < n {
            prev[next[i]] = i;
        }
        rank[i] = pair_rank(&next, i);
        if rank[i] != NONE {
            heap.push(Reverse((rank[i], i)));
        }
        if i > 0 {
            let p = prev[i];
            rank[p] = pair_rank(&next, p);
            if rank[p] != NONE {
                heap.push(Reverse((rank[p], p)));
            }
        }
        heap.extend(refused.drain(..));
    }
    let mut i = 0;
    while i < n {
        emit(i, next[i], id[i]);
        i = next[i];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::byte_ranks;
    use rustc_hash::{FxHashMap, FxHashSet};

    /// The parts (start, end, id) that the scan or the heap merge makes.
    fn parts(ranks: &FxHashMap<Vec<u8>, Rank>, s: &[u8], heap: bool) -> Vec<(usize, usize, Rank)> {
        let vocab = Vocab::new(ranks);
        let mut out = Vec::new();
        let mut push = |a, b, r| out.push((a, b, r));
        if heap {
            merge_with_heap(&vocab, s, NONE, &mut push);
        } else {
            merge_with_scan(&vocab, s, NONE, |_| None, &mut push);
        }
        out
    }
    /// Starting from whole characters and pairs changes no result.
    /// Vocabularies of random byte strings cut from mixed text at any offset
    /// (so tokens cross characters' boundaries at random ranks, as " \xd0"
    /// does in o200k), and chunks of it, also cut mid-character, with stray
    /// bytes. Each chunk is merged from bytes, from the characters and pairs
    /// that the encoder starts whole (as for a chunk with characters), and
    /// from the pairs alone (as for an ASCII chunk).
    #[test]
    fn whole_characters_and_pairs_merge_as_bytes_would() {
        let seed = std::cell::Cell::new(7u64);
        let rand = |n: usize| {
            seed.set(seed.get().wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407));
            (seed.get() >> 33) as usize % n
        };
        // Mixed text, and text mostly of ASCII letters (for pairs).
        let mixed: Vec<&[u8]> = ["д", "а", "к", "क", "ा", "ि", "中", "α", "é", " ", "x", "."]
            .iter()
            .map(|c| c.as_bytes())
            .chain([&b"\xd0"[..], b"\xb4", b"\xe0\xa4"])
            .collect();
        let latin: Vec<&[u8]> =
            ["e", "n", "t", "a", "s", " ", ".", "é", "\x7f", "\u{80}"].iter().map(|c| c.as_bytes()).collect();
        let (mut allowed, mut refused, mut inside, mut chunks, mut two) = (0, 0, 0, 0, 0);
        let (mut pairs_allowed, mut pairs_refused) = (0, 0);
        for round in 0..80 {
            let alphabet = if round % 2 == 0 { &mixed } else { &latin };
            let text =
                |len: usize| -> Vec<u8> { (0..len).flat_map(|_| alphabet[rand(alphabet.len())]).copied().collect() };
            let source = text(300);
            let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
            let mut seen: FxHashSet<Vec<u8>> = tokens.iter().cloned().collect();
            while tokens.len() < 256 + 120 {
                let start = rand(source.len() - 1);
                let t = source[start..(start + 2 + rand(5)).min(source.len())].to_vec();
                if seen.insert(t.clone()) {
                    // At a random rank, so that any token may rank below any other.
                    tokens.insert(256 + rand(tokens.len() - 255), t);
                }
            }
            let vocab = Vocab::of(&tokens);
            let listed: Vec<Option<&[u8]>> = tokens.iter().map(|t| Some(&t[..])).collect();
            let chars = Chars::new(&vocab, &listed);
            let pairs = Pairs::new(&vocab, &listed);
            for _ in 0..300 {
                let whole = text(1 + rand(16));
                let chunk = &whole[rand(2).min(whole.len() - 1)..];
                let parts = |start: &dyn Fn(usize) -> Option<(Rank, usize)>| {
                    let mut out = Vec::new();
                    merge_with_scan(&vocab, chunk, NONE, start, &mut |a, b, r| out.push((a, b, r)));
                    out
                };
                let from_bytes = parts(&|_| None);
                assert_eq!(parts(&|i| pairs.whole(&vocab, chunk, i)), from_bytes, "pairs: {chunk:?}");
                if !chars.is_empty() {
                    let start = |i| whole_at(&vocab, &chars, &pairs, chunk, i);
                    assert_eq!(parts(&start), from_bytes, "characters and pairs: {chunk:?}");
                    for i in (0..chunk.len()).filter(|&i| chunk[i] >= 0xC2) {
                        let whole = chars.whole(chunk, i);
                        // (A 3-byte character started as its first two bytes.)
                        two += whole.is_some_and(|(_, k)| k == 2 && chunk[i] >= 0xE0) as usize;
                        match whole {
                            Some(_) if !chars.whole_by_class(chunk, i) => inside += 1,
                            Some(_) => allowed += 1,
                            None => refused += 1,
                        }
                    }
                }
                chunks += 1;
                for i in (0..chunk.len()).filter(|&i| chunk[i..].len() >= 2 && vocab.get(&chunk[i..i + 2]) != NONE) {
                    match pairs.whole(&vocab, chunk, i) {
                        Some(_) => pairs_allowed += 1,
                        None if chunk[i..i + 2].is_ascii() => pairs_refused += 1,
                        None => {}
                    }
                }
            }
        }
        // The test means something only if characters and pairs started
        // whole (some characters by the exact bytes inside a word only), and
        // others were refused.
        assert!(
            allowed > 1000 && inside > 100 && refused > 1000 && two > 100,
            "{allowed} whole ({two} as two parts), {inside} whole by exact bytes, {refused} refused, in {chunks} chunks"
        );
        assert!(
            pairs_allowed > 1000 && pairs_refused > 1000,
            "{pairs_allowed} pairs whole, {pairs_refused} refused, in {chunks} chunks"
        );
    }

    /// The SSE2 minimum finds the slot the loop finds: the first of equal
    /// ranks (few distinct ranks, so ties are common), NONE included.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn sse2_minimum_is_the_leftmost() {
        let mut seed = 99u64;
        let mut rand = |n: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for _ in 0..20_000 {
            let len = rand(LONG_CHUNK as u64 + 1) as usize;
            let mut pair = [NONE; LONG_CHUNK];
            let distinct = 1 + rand(6);
            for slot in &mut pair[..len] {
                *slot = match rand(distinct + 1) {
                    0 => NONE,
                    r => [0, 1, 256, 70_000, NONE - 1, 5][r as usize % 6],
                };
            }
            let mut best = (NONE, 0);
            for (k, &r) in pair[..len].iter().enumerate() {
                if r < best.0 {
                    best = (r, k);
                }
            }
            assert_eq!(leftmost_min_sse2(&pair, len), best, "{:?}", &pair[..len]);
        }
    }

    #[test]
    fn heap_and_scan_agree() {
        let ranks = byte_ranks(&["aa", "ab", "aaab", "ba", "bab", "aaaa", "bb", "abab"]);
        let mut seed = 12345u64;
        // 32 and 33: either side of the scan's two array sizes.
        for len in [1usize, 2, 3, 5, 17, 32, 33, 64, 127, 128] {
            for _ in 0..50 {
                let s: Vec<u8> = (0..len)
                    .map(|_| {
                        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        b"ab"[(seed >> 33) as usize % 2]
                    })
                    .collect();
                assert_eq!(parts(&ranks, &s, false), parts(&ranks, &s, true), "{s:?}");
            }
        }
    }
}
