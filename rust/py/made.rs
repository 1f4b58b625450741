//! What `Trainer::train` (`py/trainer.rs`) makes from the merges as they
//! come: the Python dicts of the tokenizer, and its tokens and encoder
//! vocabulary in Rust, built once, side by side.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use crate::train;
use crate::vocab::Rank;

/// What `Trainer::train` makes from the merges as they come: the Python
/// dicts' entries, and the tokens and the encoder's vocabulary in Rust.
pub(super) struct Made<'py> {
    /// Every ordinary token's bytes, by id.
    pub(super) tokens: Vec<Vec<u8>>,
    /// One Python int per id, shared by every key and value of the dicts.
    ints: Vec<Bound<'py, PyAny>>,
    pub(super) encoder_vocab: crate::vocab::Vocab,
}

impl<'py> Made<'py> {
    /// The 256 byte tokens, in `vocab` too.
    pub(super) fn new(py: Python<'py>, vocab: &Bound<'py, PyDict>) -> PyResult<Self> {
        let mut made = Made { tokens: Vec::new(), ints: Vec::new(), encoder_vocab: Default::default() };
        for b in 0..=255u8 {
            made.token(py, vocab, vec![b])?;
        }
        Ok(made)
    }

    /// A new token: the next id.
    fn token(&mut self, py: Python<'py>, vocab: &Bound<'py, PyDict>, bytes: Vec<u8>) -> PyResult<()> {
        let id = self.tokens.len() as Rank;
        let int = id.into_pyobject(py)?.into_any();
        vocab.set_item(&int, PyBytes::new(py, &bytes))?;
        self.encoder_vocab.insert(&bytes, id);
        self.ints.push(int);
        self.tokens.push(bytes);
        Ok(())
    }

    /// `merges` in `pairs`, and the tokens they make in `vocab` (a merge
    /// whose bytes are a token already reuses its id: see `train.rs`).
    pub(super) fn add(
        &mut self,
        py: Python<'py>,
        pairs: &Bound<'py, PyDict>,
        vocab: &Bound<'py, PyDict>,
        merges: &[train::Merge],
    ) -> PyResult<()> {
        for m in merges {
            if m.new as usize == self.tokens.len() {
                let bytes = [&self.tokens[m.left as usize][..], &self.tokens[m.right as usize][..]].concat();
                self.token(py, vocab, bytes)?;
            }
            let key = PyTuple::new(py, [&self.ints[m.left as usize], &self.ints[m.right as usize]])?;
            pairs.set_item(key, &self.ints[m.new as usize])?;
        }
        Ok(())
    }
}
