"""Exceptions that are two things at once: the type tiktoken raises (so code
written for tiktoken catches them) and the ``ValueError`` bpe raises for bad
input (so code written for bpe does too). Their messages are bpe's: they
name the bad value and say what is allowed.
"""

from __future__ import annotations

__all__ = ["ErrorHandlerError", "TokenIdOverflowError", "UnknownTokenError"]


class UnknownTokenError(KeyError, ValueError):
    """A token id, or token bytes, that the vocabulary does not have
    (tiktoken: ``KeyError``)."""

    __str__ = ValueError.__str__  # a KeyError's str() would quote the message


class TokenIdOverflowError(OverflowError, ValueError):
    """A token id below 0 or past ``2**32 - 1`` (tiktoken: ``OverflowError``)."""


class ErrorHandlerError(LookupError, ValueError):
    """An ``errors=`` name that is no error handler (``bytes.decode``:
    ``LookupError``)."""
