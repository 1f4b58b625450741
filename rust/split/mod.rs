//! Splitting: cutting text into the chunks that BPE works inside (no merge
//! crosses a chunk's edge), and finding where a long text may be cut
//! without changing a chunk, so that it can be worked on in parts (files
//! read in blocks, a text spread over threads).
//!
//! In the order they build on each other:
//! - [`patterns`]: the GPT-2, GPT-4 and GPT-4o split patterns;
//! - `ascii`: ASCII byte classes and 8-bytes-at-a-time scans, for the lexers' fast paths;
//! - [`lexer`]: hand-written lexers for those three patterns;
//! - [`superword`]: a lexer for SuperBPE's second-stage pattern;
//! - [`pretokenize`]: the `Splitter` (lexer or regex), safe cut points, `cut_at`.

pub mod patterns;
mod ascii;
pub mod lexer;
pub mod superword;
pub mod pretokenize;
