"""Prompt templates kept in YAML files beside the ops that use them.

A file `rerank_memory_prompt.yaml` beside `rerank_memory_op.py` maps names to templates; the Chinese
version of `foo` is `foo_zh`. Templates use `str.format` fields; a line starting with `[flag]` is kept
(without the marker) only when the keyword `flag` is truthy.
"""

from __future__ import annotations

import re
import string
from pathlib import Path

from reme_service.config.yaml_file import read_yaml
from reme_service.errors import ConfigError

_FLAG_RE = re.compile(r"^\[(\w+)\]")


def prompt_file_for(module_file: str) -> Path:
    """`.../rerank_memory_op.py` → `.../rerank_memory_prompt.yaml`."""
    path = Path(module_file)
    stem = path.stem.removesuffix("_op")
    return path.with_name(f"{stem}_prompt.yaml")


def template_fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


class PromptLibrary:
    """Loads and caches prompt files; renders a named template in a language."""

    def __init__(self) -> None:
        self._files: dict[Path, dict[str, str]] = {}

    def load(self, path: Path) -> dict[str, str]:
        if path not in self._files:
            if not path.is_file():
                raise ConfigError(f"prompt file {path} is missing")
            data = read_yaml(path) or {}
            if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
                raise ConfigError(f"prompt file {path}: every top-level value must be a string template")
            self._files[path] = data
        return self._files[path]

    def check(self, path: Path, names: dict[str, set[str]]) -> None:
        """At start-up: every name exists in English and Chinese with the same fields as the op passes."""
        templates = self.load(path)
        for name, fields in names.items():
            for key in (name, f"{name}_zh"):
                if key not in templates:
                    raise ConfigError(f"prompt file {path}: template '{key}' is missing")
                used = template_fields(templates[key])
                if not used <= fields:
                    raise ConfigError(f"prompt file {path}: '{key}' uses unknown fields {sorted(used - fields)}")

    def render(self, path: Path, name: str, language: str = "", **values: object) -> str:
        templates = self.load(path)
        key = f"{name}_zh" if language == "zh" else name
        try:
            template = templates[key]
        except KeyError:
            raise ConfigError(f"prompt file {path}: template '{key}' is missing") from None
        lines = []
        for line in template.splitlines():
            match = _FLAG_RE.match(line)
            if match:
                if not values.get(match.group(1)):
                    continue
                line = line[match.end() :]
            lines.append(line)
        text = "\n".join(lines)
        plain = {k: v for k, v in values.items() if not isinstance(v, bool)}
        return text.format(**plain)
