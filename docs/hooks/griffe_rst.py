"""Griffe extension (mkdocs.yml, mkdocstrings' ``extensions``): the package's docstrings are written in
reST (``code``, :mod:`module` roles); the API pages render Markdown. Double backticks become single
ones and a role becomes a code span (not a link: a role may name a module these pages do not render,
which would be an unresolved cross-reference)."""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:mod|func|class|meth|attr|data|obj|exc|const):`~?([^`]+)`")


class ReSTRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(r"`\1`", obj.docstring.value).replace("``", "`")
