//! bpe: byte-level BPE tokenization — training and tiktoken-exact encoding.
//!
//! Read in this order:
//! - [`pretokenize`]: the split patterns and where a text may be cut;
//! - [`train`]: counting chunks and learning merges;
//! - [`encode`]: turning text into ids with a vocabulary, and back.
//!
//! `py.rs` (feature `python`) holds the Python bindings only.

pub mod encode;
pub mod lexer;
pub mod limits;
pub mod pieces;
pub mod pretokenize;
pub mod train;

#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;

#[cfg(feature = "python")]
mod py;
