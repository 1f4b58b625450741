"""A griffe extension for the API reference (``mkdocs.yml``): the docstrings of
bpe name other objects with Sphinx roles (``:meth:`train```); on the site they
show as code, ``train``, rather than as the raw role."""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(r":(?:py:)?(?:meth|class|func|attr|mod|data|exc|obj|const):`~?\.?([^`]+)`")


class SphinxRoles(griffe.Extension):
    def on_instance(self, *, obj, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(r"``\1``", obj.docstring.value)
