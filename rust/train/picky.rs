//! Picky BPE training (Chizhov et al., 2024, "BPE Gets Picky", arXiv
//! 2409.04599): the merge loop of ordinary BPE, plus the removal of
//! intermediate tokens once a merge has used up nearly all their
//! occurrences.
//!
//! Each token's frequency (its occurrences over the corpus) is kept. When
//! the pair `(a, b)` is merged, `f` of its occurrences become the new token:
//! the new token gains `f`, `a` and `b` lose `f` each (`2f` when `a == b`).
//! Then `a`, and after it `b`, is removed if its Intersection over Self,
//! `f / (freq + f)` with `freq` its frequency left, is above the threshold
//! `prune` and it is not a single byte. Removing `x` splits each of its
//! occurrences into its parts: the pair it was first made of, each part
//! split further while it is itself removed. The parts gain `x`'s frequency.
//! A later merge whose bytes are a removed token's restores it (same
//! training id). The vocabulary counts present tokens only: training goes
//! on until `target` tokens are present, or no pair is left.
//!
//! The merge, the removals after it, and their order follow the paper's
//! code. The pair chosen at each step follows this crate's tie-break (the
//! most frequent pair; among equal counts, the smallest `(left bytes,
//! right bytes)`; see `train/mod.rs`), so with `prune = 1` (no removal can
//! happen: `f / (freq + f) <= 1`) the merges are ordinary training's.
//!
//! Simpler than the ordinary loop (`merging.rs`): each affected word is
//! recounted whole (its old pairs out, its new pairs in), and the words of a
//! pair or of a token are kept in append-only lists that may hold stale or
//! repeated words (sorted and deduplicated when used). The oracle is
//! `bpe/reference.py` (`train_picky`).

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::count::Source;
use super::heap::PairHeap;

/// One event of a Picky training, in training ids: a new token takes the
/// next id when its bytes are new, and keeps it if it is removed and made
/// again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// `left` and `right` are merged into `new` (made, made again, or
    /// restored).
    Merge { left: u32, right: u32, new: u32 },
    /// `token` is removed: every occurrence is split into its parts.
    Remove { token: u32 },
}

/// The loop's state.
struct Picky {
    prune: f64,
    /// Every token's bytes, by training id.
    vocab: Vec<Arc<[u8]>>,
    id_of: FxHashMap<Arc<[u8]>, u32>,
    /// The pair each token was first made of (bytes: themselves).
    made_of: Vec<(u32, u32)>,
    present: Vec<bool>,
    freq: Vec<i64>,
    present_count: usize,
    words: Vec<Vec<u32>>,
    weight: Vec<i64>,
    pairs: FxHashMap<(u32, u32), i64>,
    /// The words each pair may occur in, and each token.
    pair_words: FxHashMap<(u32, u32), Vec<u32>>,
    token_words: Vec<Vec<u32>>,
    heap: PairHeap<u32>,
    /// Pair counts changed by the current step.
    delta: FxHashMap<(u32, u32), i64>,
}

fn push_once(list: &mut Vec<u32>, w: u32) {
    if list.last() != Some(&w) {
        list.push(w);
    }
}

impl Picky {
    fn new(counts: impl Source, prune: f64) -> Result<Picky, String> {
        let vocab: Vec<Arc<[u8]>> = (0..=255u8).map(|b| Arc::from(&[b][..])).collect();
        let id_of = vocab.iter().enumerate().map(|(i, b)| (b.clone(), i as u32)).collect();
        let mut state = Picky {
            prune,
            vocab,
            id_of,
            made_of: (0..256).map(|i| (i, i)).collect(),
            present: vec![true; 256],
            freq: vec![0; 256],
            present_count: 256,
            words: Vec::new(),
            weight: Vec::new(),
            pairs: FxHashMap::default(),
            pair_words: FxHashMap::default(),
            token_words: vec![Vec::new(); 256],
            heap: PairHeap { items: Vec::new(), built: 0 },
            delta: FxHashMap::default(),
        };
        counts.drain_into(&mut |chunk, n| {
            let n = i64::try_from(n).map_err(|_| "a chunk count beyond 2^63".to_string())?;
            state.words.push(chunk.iter().map(|&b| b as u32).collect());
            state.weight.push(n);
            Ok(())
        })?;
        u32::try_from(state.words.len()).map_err(|_| "too many distinct chunks to train on")?;
        for w in 0..state.words.len() {
            let (word, n) = (std::mem::take(&mut state.words[w]), state.weight[w]);
            state.enter(w as u32, &word, n);
            for &t in &word {
                state.freq[t as usize] += n;
            }
            state.words[w] = word;
        }
        for (&p, &d) in &state.delta {
            state.pairs.insert(p, d);
        }
        state.delta.clear();
        let mut all: Vec<_> = state.pairs.iter().map(|(&p, &c)| (p, c)).collect();
        all.sort_unstable(); // (pushed in one order: the heap's layout never depends on hashing)
        for (p, c) in all {
            state.heap.push(&state.vocab, c as u64, p);
        }
        Ok(state)
    }

    /// Adds word `w` (`word`, weighing `n`) to the counts in `delta` and to
    /// the lists of its pairs and tokens.
    fn enter(&mut self, w: u32, word: &[u32], n: i64) {
        for p in word.windows(2) {
            let p = (p[0], p[1]);
            *self.delta.entry(p).or_insert(0) += n;
            push_once(self.pair_words.entry(p).or_default(), w);
        }
        for &t in word {
            push_once(&mut self.token_words[t as usize], w);
        }
    }

    /// Takes word `w`'s pairs out of the counts in `delta`.
    fn leave(&mut self, word: &[u32], n: i64) {
        for p in word.windows(2) {
            *self.delta.entry((p[0], p[1])).or_insert(0) -= n;
        }
    }

    /// Applies `delta` to the counts and the heap.
    fn settle(&mut self) {
        let mut changed: Vec<_> = self.delta.drain().filter(|&(_, d)| d != 0).collect();
        changed.sort_unstable();
        for (p, d) in changed {
            let c = self.pairs.entry(p).or_insert(0);
            *c += d;
            debug_assert!(*c >= 0);
            if *c <= 0 {
                self.pairs.remove(&p);
                self.pair_words.remove(&p);
            } else {
                self.heap.push(&self.vocab, *c as u64, p);
            }
        }
    }

    /// The most frequent pair (the tie-break of `train/mod.rs`), if any.
    fn winner(&mut self) -> Option<(u32, u32)> {
        while let Some((c, p)) = self.heap.pop(&self.vocab) {
            if self.pairs.get(&p) == Some(&(c as i64)) {
                return Some(p);
            }
        }
        None
    }

    /// The words of `list`, sorted, once each.
    fn sorted(mut list: Vec<u32>) -> Vec<u32> {
        list.sort_unstable();
        list.dedup();
        list
    }

    /// Merges `(a, b)` everywhere; returns the new token and the number of
    /// occurrences merged.
    fn merge(&mut self, a: u32, b: u32) -> (u32, i64) {
        let bytes: Arc<[u8]> = [&self.vocab[a as usize][..], &self.vocab[b as usize][..]].concat().into();
        let new = match self.id_of.get(&bytes) {
            Some(&id) => id,
            None => {
                let id = self.vocab.len() as u32;
                self.vocab.push(bytes.clone());
                self.id_of.insert(bytes, id);
                self.made_of.push((a, b));
                self.present.push(false);
                self.freq.push(0);
                self.token_words.push(Vec::new());
                id
            }
        };
        if !self.present[new as usize] {
            self.present[new as usize] = true;
            self.present_count += 1;
        }
        let list = Self::sorted(self.pair_words.remove(&(a, b)).unwrap_or_default());
        let mut merged = 0i64;
        let mut out = Vec::new();
        for w in list {
            let word = std::mem::take(&mut self.words[w as usize]);
            out.clear();
            let mut i = 0;
            while i < word.len() {
                if i + 1 < word.len() && word[i] == a && word[i + 1] == b {
                    out.push(new);
                    i += 2;
                } else {
                    out.push(word[i]);
                    i += 1;
                }
            }
            let n = self.weight[w as usize];
            if out.len() == word.len() {
                self.words[w as usize] = word; // (a stale entry)
                continue;
            }
            merged += (word.len() - out.len()) as i64 * n;
            self.leave(&word, n);
            let new_word = out.clone();
            self.enter(w, &new_word, n);
            self.words[w as usize] = new_word;
        }
        self.settle();
        debug_assert!(!self.pairs.contains_key(&(a, b)));
        (new, merged)
    }

    /// Whether `x` goes after a merge used `f` of its occurrences.
    fn picky(&self, x: u32, f: i64) -> bool {
        x >= 256 && self.present[x as usize] && (f as f64) / ((self.freq[x as usize] + f) as f64) > self.prune
    }

    /// `x`'s parts: the pair it was first made of, each split further while
    /// removed.
    fn parts(&self, x: u32, out: &mut Vec<u32>) {
        if x < 256 || self.present[x as usize] {
            out.push(x);
        } else {
            let (l, r) = self.made_of[x as usize];
            self.parts(l, out);
            self.parts(r, out);
        }
    }

    /// Removes `x`: splits every occurrence into its parts.
    fn remove(&mut self, x: u32) {
        self.present[x as usize] = false;
        self.present_count -= 1;
        let mut parts = Vec::new();
        self.parts(x, &mut parts);
        let fx = std::mem::take(&mut self.freq[x as usize]);
        for &p in &parts {
            self.freq[p as usize] += fx;
        }
        let list = Self::sorted(std::mem::take(&mut self.token_words[x as usize]));
        for w in list {
            let word = std::mem::take(&mut self.words[w as usize]);
            if !word.contains(&x) {
                self.words[w as usize] = word;
                continue;
            }
            let n = self.weight[w as usize];
            let mut out = Vec::with_capacity(word.len() + parts.len());
            for &t in &word {
                if t == x {
                    out.extend_from_slice(&parts);
                } else {
                    out.push(t);
                }
            }
            self.leave(&word, n);
            self.enter(w, &out, n);
            self.words[w as usize] = out;
        }
        self.settle();
    }
}

/// Learns a Picky BPE vocabulary of `target` present tokens (256 bytes
/// included) with threshold `prune` (in (0, 1]), or until no pair is left
/// (or, as a guard against a cycle of merges and removals, after `8 *
/// target` events). `on_event` is called with each event and the number of
/// present tokens after it, and may stop the work by returning an error.
pub fn learn_picky(
    counts: impl Source,
    target: usize,
    prune: f64,
    mut on_event: impl FnMut(&Event, usize) -> Result<(), String>,
) -> Result<Vec<Event>, String> {
    let mut state = Picky::new(counts, prune)?;
    let mut events = Vec::new();
    let limit = 8 * target.max(256);
    while state.present_count < target && events.len() < limit {
        let Some((a, b)) = state.winner() else { break };
        let (new, f) = state.merge(a, b);
        let merge = Event::Merge { left: a, right: b, new };
        on_event(&merge, state.present_count)?;
        events.push(merge);
        state.freq[new as usize] += f;
        // As the paper's code: `a` first, then `b` (whose frequency `a`'s
        // removal may have raised, if `b` is one of its parts).
        let tokens: &[u32] = if a == b { &[a] } else { &[a, b] };
        for &x in tokens {
            state.freq[x as usize] -= if a == b { 2 * f } else { f };
            if state.picky(x, f) {
                state.remove(x);
                let removal = Event::Remove { token: x };
                on_event(&removal, state.present_count)?;
                events.push(removal);
            }
        }
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::patterns::GPT4_PATTERN;
    use crate::split::pretokenize::Splitter;
    use crate::train::testing::random_text;
    use crate::train::ChunkCounts;
    use crate::train::{count_documents, learn_merges, Merge};

    fn counts_of(words: &[(&str, u64)]) -> ChunkCounts {
        words.iter().map(|(w, n)| (w.as_bytes().to_vec(), *n)).collect()
    }

    #[test]
    fn prune_1_learns_ordinary_merges() {
        const WORDS: &[&str] = &["the", "then", "he", "hen", "é", "日本", "ж", "1", "42", "x", "'s", "!", "abc"];
        let text = random_text(WORDS, 20_000, 5, 0x51afd7ed558ccd25, true);
        let counts = count_documents(&Splitter::new(GPT4_PATTERN).unwrap(), &[&text]).unwrap();
        let ordinary = learn_merges(counts.clone(), 2000, |_, _| Ok(())).unwrap();
        let picky = learn_picky(counts, 2000, 1.0, |_, _| Ok(())).unwrap();
        let merges: Vec<Merge> = picky
            .iter()
            .map(|e| match *e {
                Event::Merge { left, right, new } => Merge { left, right, new },
                Event::Remove { .. } => panic!("a removal at prune = 1"),
            })
            .collect();
        assert!(merges.len() > 500);
        assert_eq!(merges, ordinary);
    }

    #[test]
    fn an_intermediate_token_is_removed() {
        // "abc" only: "ab" is made, then used up by "abc" (IoS 1 > 0.9).
        let events = learn_picky(counts_of(&[("abc", 10)]), 1000, 0.9, |_, _| Ok(())).unwrap();
        assert_eq!(
            events,
            vec![
                Event::Merge { left: 97, right: 98, new: 256 },
                Event::Merge { left: 256, right: 99, new: 257 },
                Event::Remove { token: 256 },
            ]
        );
    }

    #[test]
    fn the_vocabulary_counts_present_tokens() {
        let events = learn_picky(counts_of(&[("abcd", 10), ("ab", 1)]), 258, 0.9, |_, _| Ok(())).unwrap();
        let merges = events.iter().filter(|e| matches!(e, Event::Merge { .. })).count();
        let removals = events.len() - merges;
        assert_eq!(256 + merges - removals, 258);
    }
}
