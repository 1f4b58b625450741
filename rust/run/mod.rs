//! Running the encoder (and the chunk counter) over large inputs: long
//! texts in pieces, batches of texts on several threads, files in bulk on
//! all cores. Free of Python, so that `cargo test` runs it: the bindings
//! (`py/`) pass in what needs Python (checking Ctrl-C between pieces,
//! making the result lists).
//!
//! In the order they build on each other:
//! - [`pieces`]: long inputs in pieces, so that the bindings can see Ctrl-C between them;
//! - [`batch`]: the parallel scheduler of a batch of texts;
//! - [`bulk`]: encoding files on all cores into a sink (a flat array, `.bin` files).

pub mod pieces;
pub mod batch;
pub mod bulk;
