//! Splitting: cutting text into the chunks that BPE works inside (no merge
//! crosses a chunk's edge), and finding where a long text may be cut
//! without changing a chunk, so that it can be worked on in parts (files
//! read in blocks, a text spread over threads).
//!
//! In the order they build on each other:
//! - [`patterns`]: the split patterns of GPT-2, GPT-4, GPT-4o, Llama 3, Qwen2 and DeepSeek-V3, and the digit rules;
//! - `ascii`: ASCII byte classes and 8-bytes-at-a-time scans, for the lexers' fast paths;
//! - [`lexer`]: hand-written lexers for those patterns and for the steps of sequences we know;
//! - [`superword`]: a lexer for SuperBPE's second-stage pattern;
//! - `fancy`: any other regex, on fancy-regex, under a time budget;
//! - [`steps`]: patterns that are a sequence of steps (HF's `Split`, isolated), and their text form;
//! - [`pretokenize`]: the `Splitter` (lexer, regex or sequence), safe cut points, `cut_at`.

pub mod patterns;
mod ascii;
pub mod lexer;
pub mod superword;
mod fancy;
pub mod steps;
pub mod pretokenize;
