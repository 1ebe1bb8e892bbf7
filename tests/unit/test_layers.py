"""The layers of docs/architecture.md hold: each package imports only what lies below it, read from the code's own
imports (`ast`, every module of the package, imports under `TYPE_CHECKING` and inside functions included)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "reme_service"

#: package -> the first-level parts of reme_service it must not import
FORBIDDEN: dict[str, set[str]] = {
    "stores": {"audit", "history", "observe", "auth", "jobs", "events", "ops", "server", "app", "storage", "services"},
    "schema": {"stores", "storage", "ops", "server", "providers", "app", "services"},
    "providers": {"stores", "storage", "ops", "server", "app", "services", "audit", "history", "jobs", "events"},
    "storage": {"ops", "server", "app", "services", "jobs", "events"},
    "ops": {"server", "app"},
}
#: the engine knows only itself and these
FLOW_ALLOWED = {"flow", "errors", "concurrency"}

MAX_MODULE_LINES = 700


def _imported_parts(path: Path) -> set[str]:
    """The first-level parts of reme_service that `path` imports (`reme_service.stores.base` -> `stores`)."""
    parts: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module == "reme_service":
                names = [f"reme_service.{alias.name}" for alias in node.names]
        for name in names:
            pieces = name.split(".")
            if pieces[0] == "reme_service" and len(pieces) > 1:
                parts.add(pieces[1])
    return parts


def _modules(package: str) -> list[Path]:
    root = PACKAGE / package
    return sorted(root.rglob("*.py")) if root.is_dir() else [PACKAGE / f"{package}.py"]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_nothing_above_it(package: str) -> None:
    wrong = {
        str(path.relative_to(PACKAGE)): sorted(_imported_parts(path) & FORBIDDEN[package]) for path in _modules(package)
    }
    assert {path: parts for path, parts in wrong.items() if parts} == {}


def test_the_engine_knows_only_itself() -> None:
    wrong = {str(path.relative_to(PACKAGE)): sorted(_imported_parts(path) - FLOW_ALLOWED) for path in _modules("flow")}
    assert {path: parts for path, parts in wrong.items() if parts} == {}


def test_no_class_creation_hooks_in_the_store_and_provider_bases() -> None:
    """Audit, size bounds and metering are put around a backend from the outside (`storage/guarded.py`,
    `providers/metered.py`), not installed into every subclass when it is defined."""
    bases = [
        PACKAGE / "stores" / "base.py",
        PACKAGE / "providers" / "llm" / "base.py",
        PACKAGE / "providers" / "embedding" / "base.py",
    ]
    hooked = [str(path.relative_to(PACKAGE)) for path in bases if "__init_subclass__" in path.read_text()]
    assert hooked == []


def test_no_module_is_over_the_size_limit() -> None:
    sizes = {
        str(path.relative_to(PACKAGE)): len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    assert {path: lines for path, lines in sizes.items() if lines > MAX_MODULE_LINES} == {}
