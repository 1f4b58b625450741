"""Every public function, class, method and property has a docstring, in the
one style of the package: prose (a first sentence that says what it does or
returns), code in double backticks, other objects as Sphinx roles; no
Google- or NumPy-style sections. The API reference of the site is made from
them (docs/api.md)."""

from __future__ import annotations

import importlib
import inspect
import re

PUBLIC = ("bpe", "bpe.data", "bpe.distributed", "bpe.tiktoken")
SECTIONS = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Attributes)\s*:?\s*\n(\s*-{3,}\s*\n)?",
                      re.M)


def _public_objects():
    """(qualified name, object) of every public function, class, and of their
    methods and properties defined in bpe (inherited ones included)."""
    for module_name in PUBLIC:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or callable(obj)):
                continue  # constants: documented where they are defined
            yield f"{module_name}.{name}", obj
            if not inspect.isclass(obj):
                continue
            for attr in dir(obj):
                if attr.startswith("_"):
                    continue
                owner = next(c for c in obj.__mro__ if attr in c.__dict__)
                if not owner.__module__.startswith("bpe"):
                    continue  # object's, Exception's, ...
                member = inspect.getattr_static(obj, attr)
                if isinstance(member, (classmethod, staticmethod)):
                    member = member.__func__
                if isinstance(member, property):
                    member = member.fget
                if callable(member):
                    yield f"{module_name}.{name}.{attr}", member


def test_every_public_object_has_a_docstring():
    objects = dict(_public_objects())
    assert len(objects) > 150
    missing = sorted(name for name, obj in objects.items() if not (inspect.getdoc(obj) or "").strip())
    assert not missing, f"no docstring: {missing}"


def test_docstrings_are_in_one_style():
    wrong = []
    for name, obj in _public_objects():
        doc = inspect.getdoc(obj) or ""
        if SECTIONS.search(doc):
            wrong.append(f"{name}: a Google/NumPy-style section; write prose")
        if re.search(r"(?<![`:])`[^`\s][^`]*`(?!`)", re.sub(r":\w+:`[^`]*`", "", doc)):
            wrong.append(f"{name}: code in single backticks; reST writes ``code``")
    assert not wrong, "\n".join(sorted(set(wrong)))
