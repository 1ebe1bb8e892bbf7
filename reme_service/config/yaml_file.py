"""`read_yaml`: one YAML file as plain data, with PyYAML's safe loader — its C implementation (libyaml) when the
installed PyYAML has it, which reads the packaged configuration and prompts ~10x faster than the pure-Python one
(every app start reads them: about 0.2 s of pure-Python parsing before), and the pure-Python one otherwise. Both
build the same values: only YAML's standard tags, no Python objects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path) -> Any:
    """The document in `path` (UTF-8) as dicts, lists and scalars; `None` for an empty file."""
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_SAFE_LOADER)  # noqa: S506 - a safe loader
