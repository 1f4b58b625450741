//! Counting in bounded memory: past a cap, the counts move to disk.
//!
//! Counting keeps one entry per distinct chunk, so a corpus with many
//! distinct chunks (many languages, code, numbers) can need more memory than
//! there is. With a cap, whenever the counting maps' estimated size passes
//! half of it, they are written out as a *run* (a count table, `table.rs`:
//! sorted, so runs merge in one streaming pass) into a temporary directory,
//! and emptied. At the end the runs and what is still in memory are merged,
//! summing the counts of chunks found in several runs: the result is exact
//! whatever the cap, and goes either to training as it is read ([`Spilled`]:
//! the words are made from it, with no map of all the counts first) or
//! straight into a table file. Only `min_count` (drop chunks seen fewer
//! times, applied in that final merge, once all counts are known) loses
//! anything; it is what bounds the memory that training then needs.
//!
//! Half of the cap for the maps' tables: the other half is for a table
//! doubling as it grows (old and new tables exist at once) and for the
//! sorted copy a spill makes. The counting threads' own maps are kept small
//! under a cap by handing them over more often (`flush_bytes`).
//!
//! The temporary directory (`bpe-counts-PID-N` in the directory given, else
//! the system's) is removed when the `Spill` is dropped: after success,
//! after an error, and after Ctrl-C (which is an error here). A process
//! that is killed leaves it behind.

use std::path::{Path, PathBuf};

use super::count::{add_bound, ChunkCounts, Source, Tally, Visit};
use super::long::Long;
use super::table::{self, TableReader, TableWriter};

/// At most this many runs are kept: one more and they are merged into one
/// (so that a final merge never opens more files than this).
const FAN_IN: usize = 32;

/// The runs spilled so far, with the memory cap that makes them.
#[derive(Default)]
pub struct Spill {
    /// The split pattern (written in each run, as in any table).
    pattern: String,
    /// The cap in bytes on the counting maps, if any.
    cap: Option<usize>,
    /// Where the run directory is made (None: the system's temporary directory).
    base: Option<PathBuf>,
    runs: Option<Runs>,
}

/// The run files and their directory, removed when dropped.
struct Runs {
    dir: PathBuf,
    files: Vec<PathBuf>,
    /// Runs made so far (for the next file's name).
    made: usize,
    /// The sum of the runs' [`Source::bound`]s (a chunk in several runs
    /// counts in each).
    bound: (usize, usize),
}

impl Drop for Runs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Spill {
    pub fn new(pattern: &str) -> Self {
        Spill { pattern: pattern.to_string(), ..Spill::default() }
    }

    /// Caps the counting maps at about `cap` bytes (None: no cap), spilling
    /// into a directory made in `base` (None: the system's temporary one).
    pub fn set_cap(&mut self, cap: Option<usize>, base: Option<PathBuf>) {
        self.cap = cap;
        self.base = base;
    }

    /// Whether a cap is set.
    pub fn is_capped(&self) -> bool {
        self.cap.is_some()
    }

    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    pub fn has_runs(&self) -> bool {
        self.runs.as_ref().is_some_and(|r| !r.files.is_empty())
    }

    /// Forgets and removes the runs.
    pub fn clear(&mut self) {
        self.runs = None;
    }

    /// `counts` under this cap, for the counting threads to add to.
    pub fn tally<'a>(&'a mut self, counts: &'a mut ChunkCounts) -> Capped<'a> {
        Capped { counts, spill: self }
    }

    /// Spills `counts` if they are past the cap.
    pub fn check(&mut self, counts: &mut ChunkCounts) -> Result<(), String> {
        match self.cap {
            Some(cap) if counts.memory_bytes() > cap / 2 => self.spill(std::mem::take(counts)),
            _ => Ok(()),
        }
    }

    /// Writes `counts` as a new run (and merges the runs into one when
    /// there are too many).
    fn spill(&mut self, counts: ChunkCounts) -> Result<(), String> {
        if counts.is_empty() {
            return Ok(());
        }
        let path = self.next_run()?;
        let mut out = TableWriter::create_run(&path, &self.pattern)?;
        // The run's bound ([`Source::bound`]) counted as it is written.
        let mut bound = (0, 0);
        Sorted::of(&counts, 1).write(|chunk, count| {
            add_bound(&mut bound, chunk.len(), count);
            out.add(chunk, count)
        })?;
        out.finish()?;
        drop(counts);
        let runs = self.runs.as_mut().expect("made by next_run");
        runs.files.push(path);
        runs.bound = (runs.bound.0 + bound.0, runs.bound.1 + bound.1);
        if self.runs.as_ref().is_some_and(|r| r.files.len() > FAN_IN) {
            self.merge_runs()?;
        }
        Ok(())
    }

    /// Merges every run into one.
    fn merge_runs(&mut self) -> Result<(), String> {
        let path = self.next_run()?;
        let runs = self.runs.as_mut().expect("made by next_run");
        let mut out = TableWriter::create_run(&path, &self.pattern)?;
        table::merge(table::open_runs(&runs.files)?, |chunk, n| out.add(chunk, n), 1)?;
        out.finish()?;
        for old in runs.files.drain(..) {
            let _ = std::fs::remove_file(old);
        }
        runs.files.push(path);
        Ok(())
    }

    /// A path for the next run, making the directory on first use.
    fn next_run(&mut self) -> Result<PathBuf, String> {
        if self.runs.is_none() {
            let base = self.base.clone().unwrap_or_else(std::env::temp_dir);
            self.runs = Some(Runs { dir: make_dir(&base)?, files: Vec::new(), made: 0, bound: (0, 0) });
        }
        let runs = self.runs.as_mut().expect("made above");
        runs.made += 1;
        Ok(runs.dir.join(format!("run-{}.bpec", runs.made)))
    }

    /// Every chunk counted (in `counts` and in the runs) with its whole
    /// count, in byte order, to `out`; those counted fewer than `min_count`
    /// times are left out. `counts` are moved into a run if there are runs
    /// (the memory of a copy), else sorted in a copy and kept.
    pub fn sorted(
        &mut self,
        counts: &mut ChunkCounts,
        min_count: u64,
        mut out: impl FnMut(&[u8], u64) -> Result<(), String>,
    ) -> Result<(), String> {
        if !self.has_runs() {
            return Sorted::of(counts, min_count).write(out);
        }
        self.spill(std::mem::take(counts))?;
        let files = &self.runs.as_ref().expect("has runs").files;
        table::merge(table::open_runs(files)?, &mut out, min_count)
    }

    /// All the counts in one map, for training: `counts` themselves when
    /// nothing was spilled (less those under `min_count`), else the merge of
    /// the runs and `counts`. The runs are kept.
    pub fn into_counts(&mut self, mut counts: ChunkCounts, min_count: u64) -> Result<ChunkCounts, String> {
        if !self.has_runs() {
            if min_count > 1 {
                counts.retain_at_least(min_count);
            }
            return Ok(counts);
        }
        let mut all = ChunkCounts::default();
        self.sorted(&mut counts, min_count, |chunk, n| {
            all.add(chunk, n);
            Ok(())
        })?;
        Ok(all)
    }

    /// The counts to train on, `counts` and the runs, less those counted
    /// fewer than `min_count` times: merged as they are read ([`Spilled`]).
    pub fn source(&mut self, counts: ChunkCounts, min_count: u64) -> Spilled<'_> {
        Spilled { spill: self, counts, min_count }
    }

    /// Calls `f` with every chunk and count held (in `counts` and in the
    /// runs), in no set order, a chunk maybe more than once (adding up).
    pub fn visit(
        &self,
        counts: &ChunkCounts,
        mut f: impl FnMut(&[u8], u64) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut result = Ok(());
        counts.for_each(|chunk, n| {
            if result.is_ok() {
                result = f(chunk, n);
            }
        });
        result?;
        for path in self.runs.iter().flat_map(|r| &r.files) {
            let mut run = TableReader::open_run(path)?;
            while let Some((chunk, n)) = run.next_entry()? {
                f(chunk, n)?;
            }
        }
        Ok(())
    }

    /// The number of distinct chunks and the sum of their counts. With
    /// runs, `counts` and the runs are merged into one run first.
    pub fn size(&mut self, counts: &mut ChunkCounts) -> Result<(u64, u64), String> {
        if !self.has_runs() {
            let mut total: u64 = 0;
            counts.for_each(|_, n| total = total.saturating_add(n));
            return Ok((counts.len() as u64, total));
        }
        self.spill(std::mem::take(counts))?;
        if self.runs.as_ref().is_some_and(|r| r.files.len() > 1) {
            self.merge_runs()?;
        }
        let mut run = TableReader::open_run(&self.runs.as_ref().expect("has runs").files[0])?;
        while run.next_entry()?.is_some() {}
        Ok(run.entries_and_total())
    }
}

/// The counts of a counting, maybe capped, handed to training
/// ([`Spill::source`]): with runs, they are merged as the training reads
/// them, so the counts are never all in memory as a map (SuperBPE's second
/// stage counts nearly its whole corpus as distinct chunks: on 1 GB, the
/// map held 1.1 GB next to the words being made). The runs are kept.
pub struct Spilled<'a> {
    spill: &'a mut Spill,
    counts: ChunkCounts,
    min_count: u64,
}

impl Source for Spilled<'_> {
    fn bound(&self) -> (usize, usize) {
        let (n, total) = self.counts.bound();
        let (rn, rtotal) = self.spill.runs.as_ref().map_or((0, 0), |r| r.bound);
        (n + rn, total + rtotal)
    }

    fn drain_into(self, f: &mut Visit<'_>) -> Result<(), String> {
        match self.in_memory() {
            Ok(counts) => counts.drain_into(f),
            // (The runs' merge, in byte order: what `sorted` gives with runs.)
            Err(Spilled { spill, mut counts, min_count }) => spill.sorted(&mut counts, min_count, f),
        }
    }

    fn in_memory(self) -> Result<ChunkCounts, Self> {
        if self.spill.has_runs() {
            return Err(self);
        }
        let Spilled { mut counts, min_count, .. } = self;
        if min_count > 1 {
            counts.retain_at_least(min_count);
        }
        Ok(counts)
    }
}

/// Makes a fresh directory `bpe-counts-PID-N` in `base`.
fn make_dir(base: &Path) -> Result<PathBuf, String> {
    for n in 0.. {
        let dir = base.join(format!("bpe-counts-{}-{n}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(format!(
                    "cannot make a directory for counts spilled to disk in {}: {e}; set TMPDIR to a writable directory",
                    base.display()
                ))
            }
        }
    }
    unreachable!("one of the names is free")
}

/// Counts under a cap: what the counting threads add to (see `count.rs`).
pub struct Capped<'a> {
    counts: &'a mut ChunkCounts,
    spill: &'a mut Spill,
}

impl Tally for Capped<'_> {
    fn absorb(&mut self, counts: &mut ChunkCounts) -> Result<(), String> {
        self.counts.absorb(counts)?;
        self.spill.check(self.counts)
    }

    /// Under a cap, each thread's map is handed over after about a 16th of
    /// the cap shared among the threads, in text (a map holds about as many
    /// bytes as the text it counted, or up to ~8 times for text that is all
    /// new chunks), and at least every 64 KiB.
    fn flush_bytes(&self) -> usize {
        let usual = Tally::flush_bytes(&*self.counts);
        match self.spill.cap {
            Some(cap) => (cap / 16 / crate::threads::current_num_threads().max(1)).clamp(64 << 10, usual),
            None => usual,
        }
    }
}

/// Chunks and counts sorted by chunk bytes, as a spill writes them. Each
/// chunk of up to 15 bytes is copied where the maps of `count.rs` put it,
/// with a key that sorts as its bytes do: its bytes padded with zeros, then
/// its length (so that "ab" comes before "ab\0", as a prefix before a
/// longer string). The long chunks stay where they are, in the counts'
/// blocks, and are sorted as places there (`long.rs`): no copy of them.
struct Sorted<'a> {
    tiny: Vec<(u64, u64)>,
    short: Vec<([u8; 16], u64)>,
    long: &'a Long,
    order: Vec<u64>,
}

impl<'a> Sorted<'a> {
    /// The chunks of `counts` counted at least `min` times.
    fn of(counts: &'a ChunkCounts, min: u64) -> Sorted<'a> {
        let mut sorted = Sorted { tiny: Vec::new(), short: Vec::new(), long: counts.long(), order: Vec::new() };
        counts.for_each_packed(|chunk, n| {
            if n >= min {
                sorted.push(chunk, n)
            }
        });
        sorted.order = counts.long().sorted(min);
        sorted
    }

    /// Adds a chunk of up to 15 bytes (the long ones are sorted in place).
    fn push(&mut self, chunk: &[u8], n: u64) {
        let len = chunk.len();
        debug_assert!(len <= 15);
        if len <= 7 {
            let mut key = [0u8; 8];
            key[..len].copy_from_slice(chunk);
            key[7] = len as u8;
            self.tiny.push((u64::from_be_bytes(key), n));
        } else {
            let mut key = [0u8; 16];
            key[..len].copy_from_slice(chunk);
            key[15] = len as u8;
            self.short.push((key, n));
        }
    }

    /// Sorts and hands every entry to `out` in byte order (the three lists,
    /// each sorted, merged by their bytes).
    fn write(mut self, mut out: impl FnMut(&[u8], u64) -> Result<(), String>) -> Result<(), String> {
        self.tiny.sort_unstable();
        self.short.sort_unstable();
        let (mut t, mut s, mut l) = (0, 0, 0);
        loop {
            let tiny = self.tiny.get(t).map(|&(k, n)| (k.to_be_bytes(), n));
            let tiny = tiny.as_ref().map(|(b, n)| (&b[..b[7] as usize], *n));
            let short = self.short.get(s).map(|(b, n)| (&b[..b[15] as usize], *n));
            let long = self.order.get(l).map(|&at| self.long.at(at));
            let least = [tiny, short, long].into_iter().enumerate().filter_map(|(i, e)| Some((e?, i))).min();
            let Some(((chunk, n), list)) = least else { return Ok(()) };
            out(chunk, n)?;
            match list {
                0 => t += 1,
                1 => s += 1,
                _ => {
                    // The records lie in sorted order scattered over the
                    // blocks: each a cache miss, asked for well ahead.
                    if let Some(&ahead) = self.order.get(l + 16) {
                        self.long.prefetch(ahead);
                    }
                    l += 1
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::patterns::GPT4_PATTERN;
    use crate::split::pretokenize::Splitter;
    use crate::train::count::count_chunks;
    use crate::train::pipeline::{count_files, count_files_into};
    use crate::train::testing::{random_text, TempDir};

    fn words() -> Vec<String> {
        // Many distinct chunks of every length class: tiny, short and long.
        (0..3000u64)
            .map(|i| {
                let len = 1 + (i * 7919 % 23) as usize;
                (0..len).map(|k| (b'a' + ((i >> (k % 11)) + k as u64) as u8 % 26) as char).collect()
            })
            .collect()
    }

    #[test]
    fn sorted_orders_by_bytes_across_lengths() {
        let chunks: Vec<&[u8]> =
            vec![b"b", b"a", b"ab\0", b"ab", b"a\0", b"abcdefgh", b"abcdefg", b"abcdefghijklmnopq", b"\xff", b""];
        // Long chunks that share their first 16 bytes (sorted on the rest).
        let longer: Vec<&[u8]> = vec![
            b"abcdefghijklmnopq\0",
            b"abcdefghijklmnop",
            b"abcdefghijklmnopa",
            b"abcdefghijklmnopqr",
            b"b\xffcdefghijklmnop",
            // ... and their first 24 (sorted on the rest), or differ only
            // in zeros where a shorter one's key is padded with them.
            b"abcdefghijklmnopqrstuvwx",
            b"abcdefghijklmnopqrstuvwx\0",
            b"abcdefghijklmnopqrstuvwx\0\0a",
            b"abcdefghijklmnopqrstuvwxy",
            b"abcdefghijklmnopqrstuvw",
            b"abcdefghijklmnopqrstuvw\0",
            b"abcdefghijklmnopqrstuv\0\x01",
        ];
        let chunks: Vec<&[u8]> = chunks.into_iter().chain(longer).collect();
        let mut counts = ChunkCounts::default();
        for (i, c) in chunks.iter().enumerate() {
            counts.add(c, i as u64 + 1);
        }
        let mut got = Vec::new();
        Sorted::of(&counts, 1)
            .write(|c, _| {
                got.push(c.to_vec());
                Ok(())
            })
            .unwrap();
        let mut expected: Vec<Vec<u8>> = chunks.iter().map(|c| c.to_vec()).collect();
        expected.sort();
        assert_eq!(got, expected);
    }

    /// With caps from tiny (a spill per hand-over, runs merged past the fan-in)
    /// to none, files counted under the cap give exactly the counts counted
    /// without one, with `min_count` too; the run directory is removed.
    #[test]
    fn capped_counting_counts_exactly() {
        let w = words();
        let refs: Vec<&str> = w.iter().map(String::as_str).collect();
        let texts: Vec<String> = (0..4).map(|i| random_text(&refs, 20_000, 3, 17 + i, true)).collect();
        let dir = TempDir::new("exact");
        let paths: Vec<PathBuf> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let p = dir.0.join(format!("{i}.txt"));
                std::fs::write(&p, t).unwrap();
                p
            })
            .collect();
        let s = Splitter::new(GPT4_PATTERN).unwrap();
        let expected = count_files(&s, &paths, |_| Ok(())).unwrap();
        let runs = TempDir::new("exact-runs");
        for cap in [1, 50_000, 1 << 20, 1 << 30] {
            let mut spill = Spill::new(GPT4_PATTERN);
            spill.set_cap(Some(cap), Some(runs.0.clone()));
            let mut counts = ChunkCounts::default();
            count_files_into(&s, &paths, &mut spill.tally(&mut counts), |_| Ok(())).unwrap();
            assert_eq!(spill.has_runs(), cap < 1 << 30, "cap {cap}");
            let (n, total) = spill.size(&mut counts.clone()).unwrap();
            assert_eq!(n, expected.len() as u64, "cap {cap}");
            let mut expected_total = 0;
            expected.for_each(|_, c| expected_total += c);
            assert_eq!(total, expected_total);
            for min in [1, 2, 5] {
                let mut want = expected.clone();
                want.retain_at_least(min);
                assert_eq!(spill.into_counts(counts.clone(), min).unwrap(), want, "cap {cap} min {min}");
                // The same counts as a training source, each chunk once, within its bound.
                let source = spill.source(counts.clone(), min);
                let (bound_n, bound_bytes) = source.bound();
                let (mut got, mut calls) = (ChunkCounts::default(), 0);
                source
                    .drain_into(&mut |c, n| {
                        got.add(c, n);
                        calls += 1;
                        Ok(())
                    })
                    .unwrap();
                assert_eq!((&got, calls), (&want, want.len()), "cap {cap} min {min}");
                let (n, bytes) = want.bound();
                assert!(bound_n >= n && bound_bytes >= bytes, "cap {cap} min {min}");
                // An error from the training (Ctrl-C) stops the reading there.
                let mut calls = 0;
                let stopped = spill.source(counts.clone(), min).drain_into(&mut |_, _| {
                    calls += 1;
                    if calls == 3 {
                        Err("stop".to_string())
                    } else {
                        Ok(())
                    }
                });
                assert_eq!((stopped, calls), (Err("stop".to_string()), 3), "cap {cap} min {min}");
            }
            drop(spill);
            assert_eq!(runs.entries(), 0, "the run directory is removed");
        }
    }

    /// Texts added map by map under a tiny cap, then written sorted: the
    /// same entries as the whole map sorted.
    #[test]
    fn sorted_output_with_runs_equals_without() {
        let w = words();
        let refs: Vec<&str> = w.iter().map(String::as_str).collect();
        let s = Splitter::new(GPT4_PATTERN).unwrap();
        let runs = TempDir::new("sorted");
        let mut whole = ChunkCounts::default();
        let mut spill = Spill::new(GPT4_PATTERN);
        spill.set_cap(Some(1000), Some(runs.0.clone()));
        let mut counts = ChunkCounts::default();
        for seed in 0..40 {
            let text = random_text(&refs, 500, 3, seed + 1, false);
            count_chunks(&s, &text, &mut whole).unwrap();
            let mut part = ChunkCounts::default();
            count_chunks(&s, &text, &mut part).unwrap();
            spill.tally(&mut counts).absorb(&mut part).unwrap();
        }
        assert!(spill.has_runs());
        let collect = |spill: &mut Spill, counts: &mut ChunkCounts| {
            let mut got = Vec::new();
            spill
                .sorted(counts, 1, |c, n| {
                    got.push((c.to_vec(), n));
                    Ok(())
                })
                .unwrap();
            got
        };
        let got = collect(&mut spill, &mut counts);
        let want = collect(&mut Spill::new(GPT4_PATTERN), &mut whole);
        assert_eq!(got.len(), whole.len());
        assert_eq!(got, want);
    }

    #[test]
    fn an_unwritable_directory_is_named() {
        let mut spill = Spill::new(GPT4_PATTERN);
        spill.set_cap(Some(1), Some(PathBuf::from("/nonexistent/dir")));
        let mut counts = ChunkCounts::default();
        counts.add(b"abc", 1);
        let err = spill.check(&mut counts).unwrap_err();
        assert!(err.starts_with("cannot make a directory for counts spilled to disk in /nonexistent/dir:"), "{err}");
    }
}
