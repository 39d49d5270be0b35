"""Prompt templates (Jinja2) from the project's ``prompts/`` directory."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import jinja2
import jinja2.meta

from t2exp.errors import ConfigError


class PromptLibrary:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise ConfigError(f"paths.prompts={self.directory}: not a directory of .j2 templates")
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(self.directory)),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=False,
            autoescape=False,
        )
        self.used: dict[str, str] = {}

    @cache  # noqa: B019 - one library per run
    def _template(self, name: str) -> jinja2.Template:
        try:
            return self.env.get_template(f"{name}.j2")
        except jinja2.TemplateNotFound:
            raise ConfigError(f"prompt {name!r}: no file {self.directory / (name + '.j2')}") from None

    def variables(self, name: str) -> set[str]:
        """The names template ``name`` reads (``question``, ``contexts``, ``demos``, ...)."""
        self._template(name)  # a missing template is its ConfigError
        source = (self.directory / f"{name}.j2").read_text(encoding="utf-8")
        return set(jinja2.meta.find_undeclared_variables(self.env.parse(source)))

    def render(self, name: str, **values: object) -> str:
        tpl = self._template(name)
        self.used[name] = (self.directory / f"{name}.j2").read_text(encoding="utf-8")
        return tpl.render(**values).strip()
