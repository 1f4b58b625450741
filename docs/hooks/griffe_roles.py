"""A griffe extension for the API reference (``mkdocs.yml``). The docstrings of
bpe are reST-flavoured prose; on the site:

- objects named with Sphinx roles (``:meth:`train```) show as code, ``train``;
- doctest examples (lines from ``>>>`` to the next blank line) show as code
  blocks, not as quotations.
"""

from __future__ import annotations

import re
import textwrap

import griffe

ROLE = re.compile(r":(?:py:)?(?:meth|class|func|attr|mod|data|exc|obj|const):`~?\.?([^`]+)`")


def _doctests_as_code(text: str) -> str:
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        if lines[i].lstrip().startswith(">>>"):
            j = i
            while j < len(lines) and lines[j].strip():
                j += 1
            out += ["```pycon", *textwrap.dedent("\n".join(lines[i:j])).splitlines(), "```"]
            i = j
        else:
            out.append(lines[i])
            i += 1
    return "\n".join(out)


class SphinxRoles(griffe.Extension):
    def on_instance(self, *, obj, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _doctests_as_code(ROLE.sub(r"``\1``", obj.docstring.value))
