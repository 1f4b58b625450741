"""Seeing tokenizers at work: ``bpe compare`` (``compare.py``, its numbers in
``metrics.py``), ``bpe show`` (``show.py``), ``bpe audit`` (``audit.py``) and
``bpe serve`` (``serve.py``, its page in ``web/``).
"""

__all__: list[str] = []
