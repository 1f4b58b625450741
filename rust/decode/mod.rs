//! Ids as a stream: token ids written as text and read back, and decoding
//! a stream of ids (text or binary) to bytes, piece by piece (`bpe decode`).
//! Decoding one list of ids is the encoder's (`Encoder::decode_bytes`).
//!
//! In the order they build on each other:
//! - [`idtext`]: token ids as text, both ways (`bpe encode`'s text formats, read back);
//! - [`stream`]: a file or standard input of ids, decoded in pieces.

pub mod idtext;
pub mod stream;
