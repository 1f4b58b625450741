"""The methods of :class:`bpe.Tokenizer`, by topic, mixed into the class in
``bpe/tokenizer.py`` (private: import ``bpe.Tokenizer``).

``training.py`` (train, train_from_counts), ``encoding.py`` (encode and its
special-token policy), ``decoding.py`` (decode, token bytes), ``bulk.py``
(batches and files into numpy arrays, the chunk cache), ``budgets.py``
(truncate, chunk), ``offsets.py`` (count, encode_with_offsets),
``dropout.py`` (BPE-dropout), ``reshape.py`` (extend, shrink, special
tokens), ``interop.py`` (tiktoken and HuggingFace objects and files),
``pretrained.py`` (transformers folders).
"""

__all__: list[str] = []
