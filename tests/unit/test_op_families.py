"""The op families are independent: no family under `reme_service/ops/` imports another one.

What several families need lives in `ops/common` (the op base, shared keys and fields, `transcript`) or in
`reme_service/retrieval` (the time parser, periods, rescoring), and neither of those imports a family. The
imports are read from the source with `ast` (every `import` statement, also those inside functions), so a lazy
import counts as much as a top-level one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import reme_service

PACKAGE_ROOT = Path(reme_service.__file__).resolve().parent
OPS_DIR = PACKAGE_ROOT / "ops"
SHARED_OPS = "common"


def op_families() -> list[str]:
    """The subpackages of `reme_service/ops` other than `common`: task, personal, tool, working, vector_store, ..."""
    return sorted(
        path.name
        for path in OPS_DIR.iterdir()
        if path.is_dir() and (path / "__init__.py").exists() and path.name != SHARED_OPS
    )


def module_name(path: Path) -> str:
    """`reme_service/ops/task/build_query_op.py` → `reme_service.ops.task.build_query_op` (a package's
    `__init__.py` names the package)."""
    parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """Every module `source` imports, absolute, with its line: `from a.b import c` gives `a.b` and `a.b.c` (`c` may
    be a submodule), a relative import is resolved against `module`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((node.lineno, base))
            found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names if alias.name != "*")
    return found


def family_of(module: str) -> str | None:
    """The op family `module` belongs to (`reme_service.ops.task.x` → `task`), or None outside the families."""
    parts = module.split(".")
    if parts[:2] != ["reme_service", "ops"] or len(parts) < 3 or parts[2] == SHARED_OPS:
        return None
    return parts[2] if parts[2] in op_families() else None


def violations(source: str, module: str, is_package: bool = False) -> list[str]:
    """The imports of `module` that break the family rule: a family importing another family; `ops/common` or
    `reme_service/retrieval` importing any family (retrieval imports nothing of `ops` at all)."""
    own = family_of(module)
    shared_retrieval = module == "reme_service.retrieval" or module.startswith("reme_service.retrieval.")
    broken: dict[int, str] = {}  # one per import statement (its line), naming the first module it breaks on
    for line, target in imported_modules(source, module, is_package):
        target_family = family_of(target)
        in_ops = target == "reme_service.ops" or target.startswith("reme_service.ops.")
        if (shared_retrieval and in_ops) or (target_family is not None and target_family != own):
            broken.setdefault(line, f"{module}:{line} imports {target}")
    return list(broken.values())


def checked_files() -> list[Path]:
    """Every module of the op families, of `ops/common` and of `reme_service/retrieval` (not `ops/__init__.py`,
    the registry that gathers all the families' ops)."""
    files = [path for path in OPS_DIR.rglob("*.py") if path.parent != OPS_DIR]
    files.extend((PACKAGE_ROOT / "retrieval").rglob("*.py"))
    return sorted(files)


def test_the_families_are_found() -> None:
    assert {"task", "personal", "tool", "working", "vector_store"} <= set(op_families())


def test_no_family_imports_another() -> None:
    files = checked_files()
    assert len(files) > 50  # the walk found the ops, not an empty folder
    broken = [
        violation
        for path in files
        for violation in violations(path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py")
    ]
    assert broken == []


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("reme_service.ops.personal.fuse_rerank_op", "from reme_service.ops.vector_store.rescore import rescore\n"),
        ("reme_service.ops.working.offload", "from reme_service.ops.task import transcript\n"),
        ("reme_service.ops.task.x", "def f() -> None:\n    import reme_service.ops.tool.statistics\n"),
        ("reme_service.ops.task.x", "from ..personal import keys\n"),
        ("reme_service.ops.common.search", "from reme_service.ops.personal.keys import QUERY\n"),
        ("reme_service.retrieval.rescore", "from reme_service.ops.common.keys import QUERY\n"),
    ],
)
def test_a_cross_family_import_is_caught(module: str, source: str) -> None:
    assert violations(source, module) != []


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("reme_service.ops.personal.fuse_rerank_op", "from reme_service.retrieval.rescore import rescore\n"),
        ("reme_service.ops.working.offload", "from reme_service.ops.common.transcript import render_transcript\n"),
        ("reme_service.ops.task.x", "from reme_service.ops.task import keys\nfrom . import fields\n"),
        ("reme_service.ops.tool.x", "from reme_service.ops import common\n"),
    ],
)
def test_imports_within_a_family_or_of_shared_code_pass(module: str, source: str) -> None:
    assert violations(source, module) == []
