"""Tokenizer files, read and written: our ``.bpe`` file (``bpefile.py``),
HuggingFace's ``tokenizer.json`` (``huggingface.py``), and any of them or an
OpenAI encoding by what a user types after ``-t`` (``specs.py``). Pure
functions of text and dicts: the Tokenizer's methods (``bpe/_tokenizer/``)
call them.
"""

__all__: list[str] = []
