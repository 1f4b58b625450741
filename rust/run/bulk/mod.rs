//! Encoding files in bulk: byte ranges of files read in Rust (`input`), cut
//! at safe points and encoded on all cores, the ids handed in order to a
//! sink (one flat array for `Tokenizer.encode_files`, the `.bin` files of a
//! dataset for `bpe encode --out`). No Python string is ever made.
//!
//! A pipeline of two stages: while the pool encodes one block (cut into
//! pieces, one per task), the calling thread's helper reads the next. So one
//! large file uses every core, and memory stays at about two blocks plus the
//! ids of one (see `BLOCK_BYTES`), whatever the size of the input.
//!
//! The ids equal those of encoding each range whole: blocks and pieces end
//! only at line and word cuts, which change no chunk for the built-in
//! patterns (`split/pretokenize.rs`), and never inside the text of a special token
//! when special tokens are looked for. A custom pattern's range is read and
//! encoded whole.

use std::path::Path;

use rustc_hash::FxHashSet;

use crate::encode::Encoder;
use crate::input::{Block, Blocks, Range};
use crate::run::pieces::{cut, encode_pieces, last_cut_avoiding};
use crate::vocab::Rank;

#[cfg(unix)]
mod files;

/// Bytes read at once: 16 MiB (a read from the page cache takes a few
/// milliseconds, encoding it ~100 ms on one core). Peak memory is about
/// three times this plus four bytes per id of one block.
pub const BLOCK_BYTES: usize = 16 << 20;

/// One document, or part of one: a byte range of a file, whose ids go to
/// sink `sink` (e.g. 0 for train.bin, 1 for val.bin). `doc_start`: it
/// starts a document, so the separator (if any) goes before it unless it
/// is the sink's first document.
#[derive(Clone, Debug)]
pub struct Segment {
    pub range: Range,
    pub sink: usize,
    pub doc_start: bool,
}

/// What to do with special-token text, and what goes between documents.
pub struct Options<'a> {
    /// Special tokens to encode as their ids.
    pub allowed: &'a FxHashSet<String>,
    /// Special tokens whose text is an error.
    pub disallowed: &'a [String],
    pub separator: Option<Rank>,
}

/// Where the ids go, in order.
pub trait Sink {
    /// Segment `segment` starts (its separator, if any, has been sent).
    fn start(&mut self, segment: usize) -> Result<(), String>;
    /// The next ids of the current segment (or a separator) for sink `sink`.
    fn ids(&mut self, sink: usize, ids: &[Rank]) -> Result<(), String>;
}

/// Encodes `segments` in order on `pool`, giving the ids to `sink`;
/// `between` runs before each block, with the bytes encoded so far (to see
/// Ctrl-C, and show progress). Stops at the first
/// error: bytes that are not UTF-8, disallowed special-token text (each
/// named by file and byte offset), a read error or one of the sink's.
/// Blocks are about `block_bytes` (`BLOCK_BYTES`; tests use small ones).
pub fn encode_segments(
    enc: &Encoder,
    segments: &[Segment],
    opts: &Options,
    pool: &rayon::ThreadPool,
    block_bytes: usize,
    mut between: impl FnMut(u64) -> Result<(), String>,
    sink: &mut dyn Sink,
) -> Result<(), String> {
    let ranges: Vec<Range> = segments.iter().map(|s| s.range.clone()).collect();
    // Blocks and pieces never end inside special-token text when some is
    // looked for (allowed, or refused).
    let avoid: Vec<&str> =
        if opts.allowed.is_empty() && opts.disallowed.is_empty() { vec![] } else { enc.special_texts().collect() };
    // Regular files: every thread reads its own pieces (`files.rs`); other
    // inputs (streams, compressed files) and custom patterns: blocks.
    #[cfg(unix)]
    if enc.splitter().cuttable() {
        if let Some(()) =
            files::encode_files_parallel(enc, segments, opts, &avoid, pool, block_bytes, &mut between, sink)?
        {
            return Ok(());
        }
    }
    let cutter = |b: &[u8]| last_cut_avoiding(b, &avoid);
    let whole = |_: &[u8]| None;
    let cuttable = enc.splitter().cuttable();
    let block_bytes = if cuttable { block_bytes } else { usize::MAX >> 1 };
    let mut blocks = Blocks::new(&ranges, block_bytes, if cuttable { &cutter } else { &whole });
    let threads = pool.current_num_threads();
    let mut order = Order::default();
    let mut next = blocks.next_block()?;
    let mut done = 0u64;
    while let Some(block) = next {
        between(done)?;
        done += block.text.len() as u64;
        // This thread reads the next block while the pool encodes this one.
        let (encoded, read) = std::thread::scope(|scope| {
            let reader = scope.spawn(|| blocks.next_block());
            let encoded = pool.install(|| encode_block(enc, &block, &segments[block.range], opts, &avoid, threads));
            (encoded, reader.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
        });
        let encoded = encoded?;
        let seg = &segments[block.range];
        order.enter(block.range, seg, opts, sink)?;
        for ids in &encoded {
            sink.ids(seg.sink, ids)?;
        }
        next = read?;
    }
    between(done)
}

/// Where the sink is in the segments, for both paths (blocks, and
/// `files.rs`'s pieces): a segment's start is told to the sink once, and a
/// document after the first of its sink gets the separator before it.
#[derive(Default)]
struct Order {
    current: Option<usize>,
    docs_in_sink: Vec<usize>,
}

impl Order {
    /// Segment `index` (`seg`) gets ids next: its start and separator, if
    /// it is new.
    fn enter(&mut self, index: usize, seg: &Segment, opts: &Options, sink: &mut dyn Sink) -> Result<(), String> {
        if self.current == Some(index) {
            return Ok(());
        }
        self.current = Some(index);
        if self.docs_in_sink.len() <= seg.sink {
            self.docs_in_sink.resize(seg.sink + 1, 0);
        }
        if seg.doc_start {
            if let Some(sep) = opts.separator.filter(|_| self.docs_in_sink[seg.sink] > 0) {
                sink.ids(seg.sink, &[sep])?;
            }
            self.docs_in_sink[seg.sink] += 1;
        }
        sink.start(index)
    }
}

/// The ids of one block, piece by piece, encoded by the pool's threads.
fn encode_block(
    enc: &Encoder,
    block: &Block,
    seg: &Segment,
    opts: &Options,
    avoid: &[&str],
    threads: usize,
) -> Result<Vec<Vec<Rank>>, String> {
    let text = block.text.as_str();
    if !opts.disallowed.is_empty() {
        if let Some(found) = enc.find_special(text, opts.disallowed) {
            let at = block.offset + memchr::memmem::find(text.as_bytes(), found.as_bytes()).unwrap_or(0) as u64;
            return Err(disallowed_error(&seg.range.path, found, at));
        }
    }
    // Pieces of a quarter of a block per thread (so that the threads' loads
    // even out), between 64 KiB and 1 MiB.
    let target = (text.len() / (4 * threads)).clamp(64 << 10, 1 << 20);
    let pieces = if enc.splitter().cuttable() { cut(text, target, avoid) } else { vec![text] };
    encode_pieces(enc, &pieces, opts.allowed)
}

/// The error for disallowed special-token text `found` at byte `at` of `path`.
fn disallowed_error(path: &Path, found: &str, at: u64) -> String {
    format!(
        "{} holds the special token {found:?} at byte offset {at}{}; to encode such text as \
         ordinary text pass disallowed_special=() (CLI: --special-as-text), to encode it as the \
         special token pass allowed_special (CLI: --allow-special)",
        crate::input::name(path),
        crate::limits::line_suffix(path, at)
    )
}

/// A sink that keeps every id in one vector (sink numbers are ignored), and
/// where each segment's ids start.
#[derive(Default)]
pub struct Collect {
    pub ids: Vec<Rank>,
    /// `starts[k]`: the index in `ids` of segment k's first id (segments
    /// never started are filled in by `finish`).
    pub starts: Vec<usize>,
}

impl Sink for Collect {
    fn start(&mut self, segment: usize) -> Result<(), String> {
        while self.starts.len() <= segment {
            self.starts.push(self.ids.len());
        }
        Ok(())
    }

    fn ids(&mut self, _sink: usize, ids: &[Rank]) -> Result<(), String> {
        // The pages the ids will fill, mapped in one call rather than a
        // fault each as the copy reaches them (where the room was reserved:
        // `encode_files` reserves it; ranges under 1 MiB are left alone).
        if self.ids.capacity() - self.ids.len() >= ids.len() {
            let end = self.ids.as_mut_ptr_range().end as *mut u8;
            crate::pages::map_for_writing(end, std::mem::size_of_val(ids));
        }
        crate::pages::append_streaming(&mut self.ids, ids);
        Ok(())
    }
}

impl Collect {
    /// The offsets of `segments` segments: each one's first id, then the
    /// number of ids.
    pub fn finish(mut self, segments: usize) -> (Vec<Rank>, Vec<u64>) {
        while self.starts.len() < segments {
            self.starts.push(self.ids.len());
        }
        let mut offsets: Vec<u64> = self.starts.iter().map(|&s| s as u64).collect();
        offsets.push(self.ids.len() as u64);
        (self.ids, offsets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::patterns::GPT4_PATTERN;
    use crate::vocab::byte_ranks;
    use rustc_hash::FxHashMap;
    use std::path::PathBuf;

    /// A file of the tests' own (also `files.rs`'s tests: names must differ).
    pub(super) fn temp(name: &str, bytes: &[u8]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("bpe-bulk-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// A whole file, one document.
    pub(super) fn segment(path: &std::path::Path) -> Segment {
        Segment { range: Range { path: path.to_path_buf(), start: 0, end: None }, sink: 0, doc_start: true }
    }

    /// Files give the ids of their texts encoded whole, the separator
    /// between them, whatever the threads and however small the blocks.
    #[test]
    fn files_encode_as_whole_texts() {
        let specials: FxHashMap<String, Rank> = [("<|end|>".to_string(), 300)].into_iter().collect();
        let ranks = byte_ranks(&["th", "the", "he", "en", "an", " the", "\n\n"]);
        let enc = Encoder::new(ranks, specials, GPT4_PATTERN).unwrap();
        let a = "Then the anthem, 12345 times.\n\n  The end<|end|> of it\n".repeat(20_000);
        let b = "";
        let c = "héllo wörld ".repeat(30_000);
        let paths = [temp("a", a.as_bytes()), temp("b", b.as_bytes()), temp("c", c.as_bytes())];
        let segs: Vec<Segment> = paths.iter().map(|p| segment(p)).collect();
        let none = FxHashSet::default();
        let allowed: FxHashSet<String> = ["<|end|>".to_string()].into_iter().collect();
        for allow in [&none, &allowed] {
            let whole: Vec<Vec<Rank>> = [&a, b, &c].iter().map(|t| enc.encode(t, allow).unwrap()).collect();
            for (threads, block) in [(1, BLOCK_BYTES), (3, BLOCK_BYTES), (2, 4096), (3, 100)] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                let opts = Options { allowed: allow, disallowed: &[], separator: Some(300) };
                let mut out = Collect::default();
                encode_segments(&enc, &segs, &opts, &pool, block, |_| Ok(()), &mut out).unwrap();
                let (ids, offsets) = out.finish(segs.len());
                let want: Vec<Rank> = [whole[0].clone(), vec![300], vec![300], whole[2].clone()].concat();
                assert!(ids == want, "threads {threads}, block {block}, allowed {allow:?}");
                let n0 = whole[0].len() as u64;
                assert_eq!(offsets, vec![0, n0 + 1, n0 + 2, want.len() as u64]);
            }
        }
        // Disallowed special-token text is an error naming file and offset.
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let refuse = ["<|end|>".to_string()];
        let opts = Options { allowed: &none, disallowed: &refuse, separator: None };
        let err =
            encode_segments(&enc, &segs, &opts, &pool, BLOCK_BYTES, |_| Ok(()), &mut Collect::default()).unwrap_err();
        assert!(err.contains("special token \"<|end|>\" at byte offset 40 (line 3)"), "{err}");
    }
}
