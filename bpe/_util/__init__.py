"""The ground floor: what every other package uses and which uses nothing
of bpe's but the Rust core. ``files.py`` (checks before reading or writing,
atomic writes), ``patterns.py`` (split patterns), ``specials.py`` (special
tokens), ``vocab.py`` (ids and their bytes), ``sizes.py`` (sizes and counts
as people write them).
"""

__all__: list[str] = []
