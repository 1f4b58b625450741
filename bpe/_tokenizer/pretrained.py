"""transformers folders: ``save_pretrained`` writes a directory that
``transformers.AutoTokenizer.from_pretrained`` loads as a fast tokenizer
with our ids; ``from_pretrained`` reads such a directory back, or a
HuggingFace hub-style folder already on disk.

The folder holds three small JSON files:

- ``tokenizer.json``: the whole tokenizer, as ``save_huggingface`` writes it
  (bpe/formats/huggingface.py). It alone decides the ids.
- ``tokenizer_config.json``: which class to build (``PreTrainedTokenizerFast``,
  which wraps tokenizer.json, so no model code is needed) and the settings
  that would otherwise change text: no clean-up of spaces when decoding, no
  tokens added around a text.
- ``special_tokens_map.json``: the roles of the special tokens;
  ``<|endoftext|>``, where there is one, is the end-of-text (and
  beginning-of-text) token, as in GPT-2; the others are "additional" special
  tokens.

Nothing here needs transformers (or the network): the files are plain JSON.
Reading never looks anything up on the hub: a name that is not a folder on
disk is an error saying how to download it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypeVar

from bpe._util.files import PathLike, atomic_write_text
from bpe._util.specials import ENDOFTEXT

T = TypeVar("T", bound="Pretrained")

TOKENIZER_JSON = "tokenizer.json"
CONFIG_JSON = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"


def _config(special_tokens: dict[str, int]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(tokenizer_config.json, special_tokens_map.json) for these specials."""
    roles: dict[str, Any] = {}
    if ENDOFTEXT in special_tokens:
        roles["bos_token"] = roles["eos_token"] = ENDOFTEXT
    others = [t for t, _ in sorted(special_tokens.items(), key=lambda kv: kv[1]) if t != ENDOFTEXT]
    if others:
        roles["additional_special_tokens"] = others
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        # Decoding gives the text back exactly: no " ." -> "." clean-up.
        "clean_up_tokenization_spaces": False,
        # No BOS/EOS added around a text: the ids are the text's only.
        "add_bos_token": False,
        "add_eos_token": False,
        "added_tokens_decoder": {
            str(i): {"content": t, "lstrip": False, "rstrip": False, "normalized": False,
                     "single_word": False, "special": True}
            for t, i in sorted(special_tokens.items(), key=lambda kv: kv[1])
        },
        **roles,
    }
    return config, roles


class Pretrained:
    """Mixed into :class:`bpe.Tokenizer` (which gives ``save_huggingface``,
    ``from_huggingface`` and ``special_tokens``)."""

    def save_pretrained(self, directory: PathLike) -> tuple[str, ...]:
        """Writes ``tokenizer.json``, ``tokenizer_config.json`` and
        ``special_tokens_map.json`` into ``directory`` (made if missing), each
        atomically, and returns their paths. ``transformers.AutoTokenizer.
        from_pretrained(directory)`` then loads a fast tokenizer that gives
        our ids (special-token text always becomes the special id there, as
        ``encode(..., allowed_special="all")``)."""
        if not isinstance(directory, (str, os.PathLike)):
            raise TypeError(f"directory must be a str or a path, not {type(directory).__name__}")
        d = Path(directory)
        if d.exists() and not d.is_dir():
            raise NotADirectoryError(f"{d} is a file, not a directory; save_pretrained writes a folder of files")
        d.mkdir(parents=True, exist_ok=True)
        specials: dict[str, int] = self.special_tokens  # type: ignore[attr-defined]
        config, roles = _config(specials)
        paths = (str(d / TOKENIZER_JSON), str(d / CONFIG_JSON), str(d / SPECIAL_TOKENS_MAP))
        self.save_huggingface(paths[0])  # type: ignore[attr-defined]
        atomic_write_text(paths[1], json.dumps(config, ensure_ascii=False, indent=2) + "\n")
        atomic_write_text(paths[2], json.dumps(roles, ensure_ascii=False, indent=2) + "\n")
        return paths

    @classmethod
    def from_pretrained(cls: type[T], directory: PathLike) -> T:
        """Reads a folder written by :meth:`save_pretrained`, or a
        HuggingFace hub-style folder on disk holding a byte-level BPE
        ``tokenizer.json`` (a path to the ``tokenizer.json`` itself works
        too). Local paths only: nothing is downloaded."""
        if not isinstance(directory, (str, os.PathLike)):
            raise TypeError(f"directory must be a str or a path, not {type(directory).__name__}")
        d = Path(directory)
        if d.is_file():
            return cls.from_huggingface(d)  # type: ignore[attr-defined, no-any-return]
        if not d.is_dir():
            hint = ""
            if isinstance(directory, str) and not os.path.isabs(directory) and directory.count("/") <= 1:
                hint = (f"; from_pretrained reads local folders only (nothing is downloaded): fetch it first, "
                        f"e.g. huggingface_hub.snapshot_download({directory!r}), and pass that folder")
            raise FileNotFoundError(f"{d}: no such directory{hint}")
        tj = d / TOKENIZER_JSON
        if not tj.is_file():
            present = ", ".join(sorted(p.name for p in d.iterdir())[:8]) or "nothing"
            raise FileNotFoundError(
                f"{d} has no {TOKENIZER_JSON} (it holds {present}); from_pretrained reads folders with a "
                f"byte-level BPE tokenizer.json, as save_pretrained and transformers' fast tokenizers write"
            )
        return cls.from_huggingface(tj)  # type: ignore[attr-defined, no-any-return]
