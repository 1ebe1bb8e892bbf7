"""Build an `AppConfig` from the packaged default YAML, user YAML overlays and `a.b.c=value` overrides.

Precedence, low to high: packaged `default.yaml` and `flows/*.yaml` < each `config=` file in order (merged
key by key, never replacing the default wholesale) < `REME_*` environment variables (`env_overrides`) < dotted
overrides on the command line. The environment is the process's over a `.env` file (`read_env`); the provider
variables (`FLOW_*`) in it are consulted when providers are built. Nothing is written to `os.environ`.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from dotenv import dotenv_values
from pydantic import BaseModel, ValidationError

from reme_service.config.models import AppConfig
from reme_service.config.reme_noops import drop_noop_keys
from reme_service.config.yaml_file import read_yaml
from reme_service.errors import ConfigError, describe_validation_errors

PACKAGED_DIR = Path(__file__).resolve().parent
DEFAULT_YAML = PACKAGED_DIR / "default.yaml"
FLOWS_DIR = PACKAGED_DIR / "flows"
_INT_RE = re.compile(r"^[+-]?\d+$")
logger = logging.getLogger("reme_service.config")


def coerce_value(text: str) -> Any:
    """Turn a command-line value into a typed value: bool, None, int, float, JSON or Python literal, else str."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    if _INT_RE.match(text.strip()):
        return int(text)
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)  # single-quoted dicts/lists, as ReMe's README writes them
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def deep_merge(base: dict[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """Recursive merge: dicts merge key by key, any other value replaces."""
    out = dict(base)
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def set_dotted(target: dict[str, Any], dotted: str, value: Any) -> None:
    """Set `a.b.c` in a nested dict, creating missing levels."""
    parts = dotted.split(".")
    if not all(parts):
        raise ConfigError(f"invalid override key {dotted!r}")
    node = target
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value


def _resolve_yaml(name: str) -> Path:
    candidates = [Path(name)]
    if not name.endswith((".yaml", ".yml")):
        candidates.append(Path(f"{name}.yaml"))
        candidates.append(PACKAGED_DIR / f"{name}.yaml")
    for path in candidates:
        if path.is_file():
            return path
    raise ConfigError(f"config file {name!r} not found (looked at: {', '.join(str(c) for c in candidates)})")


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = read_yaml(path) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    return data


def parse_args(args: Iterable[str]) -> tuple[list[str], list[tuple[str, Any]]]:
    """Split `config=a.yaml,b.yaml` selectors from `key=value` overrides (leading dashes are ignored)."""
    configs: list[str] = []
    overrides: list[tuple[str, Any]] = []
    for raw in args:
        arg = raw.lstrip("-")
        key, sep, value = arg.partition("=")
        if not sep:
            raise ConfigError(f"argument {raw!r} is not of the form key=value")
        if key in ("config", "config_path"):
            configs.extend(v for v in value.split(",") if v)
        else:
            overrides.append((key, coerce_value(value)))
    return configs, overrides


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """Walk field annotations along `loc` to the model that owns the last key (for 'valid keys' hints)."""
    current: Any = model
    for part in loc:
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            if field is None:
                return current
            current = field.annotation
        else:
            args = getattr(current, "__args__", ())
            current = next((a for a in args if isinstance(a, type) and issubclass(a, BaseModel)), None)
            if current is None:
                return None
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unknown_key(err: Mapping[str, Any]) -> str | None:
    """The message of an `extra_forbidden` error, listing the keys valid at that place; None for other errors."""
    if err.get("type") != "extra_forbidden":
        return None
    loc = tuple(err["loc"])
    owner = _model_at(AppConfig, loc[:-1])
    valid = ", ".join(owner.model_fields) if owner else "?"
    return f"unknown config key '{'.'.join(str(p) for p in loc)}' (valid keys here: {valid})"


def _explain(exc: ValidationError) -> str:
    return describe_validation_errors(exc, line="config key '{loc}': {msg}", no_loc="(top level)", explain=_unknown_key)


ENV_PREFIX = "REME_"


def env_overrides(environ: Mapping[str, str]) -> list[tuple[str, Any]]:
    """The config keys set by `REME_<PATH>` variables: the dotted path with `__` between levels, any case
    (`REME_HTTP__PORT=9000` → `http.port`, `REME_VECTOR_STORE__DEFAULT__BACKEND=chroma`). Values are typed as on
    the command line. Variables whose first level is no config key are someone else's (`REME_TEST_STORE`) and left
    alone — except one that misses a `__` (`REME_HTTP_PORT`), which is an error saying how to write it."""
    fields = AppConfig.model_fields
    found: list[tuple[str, Any]] = []
    for name in sorted(environ):
        if not name.upper().startswith(ENV_PREFIX) or len(name) == len(ENV_PREFIX):
            continue
        parts = name[len(ENV_PREFIX) :].lower().split("__")
        if parts[0] not in fields:
            near = max((f for f in fields if parts[0].startswith(f"{f}_")), key=len, default=None)
            if near is not None:
                fixed = f"{ENV_PREFIX}{near.upper()}__{name[len(ENV_PREFIX) + len(near) + 1 :]}"
                raise ConfigError(f"environment variable {name}: levels are separated by '__' (did you mean {fixed}?)")
            continue
        if not all(parts):
            raise ConfigError(f"environment variable {name}: empty level in the key (use one '__' between levels)")
        found.append((".".join(parts), coerce_value(environ[name])))
    return found


def load_config(
    args: Iterable[str] = (), *, extra: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> AppConfig:
    """Build and validate the config; raises `ConfigError` naming any wrong key. `environ` (default: `read_env()`)
    supplies the `REME_*` variables."""
    configs, overrides = parse_args(args)
    data = _read_yaml(DEFAULT_YAML)
    for flow_file in sorted(FLOWS_DIR.glob("*.yaml")):
        data = deep_merge(data, _read_yaml(flow_file))
    for name in configs:
        data = deep_merge(data, _read_yaml(_resolve_yaml(name)))
    for key, value in env_overrides(read_env() if environ is None else environ):
        set_dotted(data, key, value)
    for key, value in overrides:
        set_dotted(data, key, value)
    for key, value in (extra or {}).items():
        set_dotted(data, key, value)
    for warning in drop_noop_keys(data):
        logger.warning("%s", warning)
    try:
        return AppConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_explain(exc)) from None


def read_env(cwd: Path | None = None, *, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The process environment over `.env` (found in the working directory or up to four parents).

    The real environment always wins over `.env`; the result is a plain dict, never written back.
    """
    start = (cwd or Path.cwd()).resolve()
    merged: dict[str, str] = {}
    for folder in [start, *list(start.parents)[:4]]:
        env_file = folder / ".env"
        if env_file.is_file():
            merged = {k: v for k, v in dotenv_values(env_file).items() if v is not None}
            break
    merged.update(environ if environ is not None else os.environ)
    return merged
