"""Corpora as people hold them: which reader each file needs, directories
and globs (``paths.py``), Arrow data (Parquet files, pyarrow tables, HF
datasets: ``arrow.py``), and the documents a training or an encoding reads
from any of these (``corpus.py``). The bytes themselves are read in Rust.
"""

__all__: list[str] = []
