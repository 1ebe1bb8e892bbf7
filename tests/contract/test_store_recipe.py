"""The store recipe of docs/extending.md ("A new store"), followed literally, passes the whole store contract.

The python blocks of that section (but the test module it shows, which names its own file) are written one after
the other into one file, the way the recipe says to, imported, and the store it defines runs `ContractTests`.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from reme_service.stores.base import VectorStore
from reme_service.stores.template import TemplateVectorStore
from reme_service.testing.contract import ContractTests
from reme_service.testing.contract.support import CountingEmbedder

EXTENDING = Path(__file__).resolve().parents[2] / "docs" / "extending.md"
FENCE = re.compile(r"^( *)```python\n(.*?)^\1```$", re.MULTILINE | re.DOTALL)


def recipe_blocks() -> list[str]:
    """The python blocks of the section "A new store", each without the indentation of its fence."""
    text = EXTENDING.read_text(encoding="utf-8")
    section = text.split("\n## A new store\n", 1)[1].split("\n## ", 1)[0]
    blocks = []
    for match in FENCE.finditer(section):
        indent = len(match.group(1))
        blocks.append("".join(line[indent:] for line in match.group(2).splitlines(keepends=True)))
    return blocks


def store_source() -> str:
    """The store module the recipe builds: its blocks but the test module's (which starts with its path)."""
    return "\n".join(block for block in recipe_blocks() if not block.startswith("# tests/"))


@pytest.fixture(scope="module")
def recipe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    path = tmp_path_factory.mktemp("recipe") / "recipe_store.py"
    path.write_text(store_source(), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("recipe_store", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the module's annotations through sys.modules
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def test_the_recipe_shows_a_store_and_its_contract_test() -> None:
    blocks = recipe_blocks()
    assert len(blocks) == 4
    assert blocks[-1].startswith("# tests/contract/test_dict_store.py")
    assert "class TestDictStore(ContractTests):" in blocks[-1]
    assert "DictVectorStore(embedder=embedder)" in blocks[-1]


def test_the_recipe_store_is_a_template_store(recipe: ModuleType) -> None:
    assert issubclass(recipe.DictVectorStore, TemplateVectorStore)
    assert not getattr(recipe.DictVectorStore, "__abstractmethods__", None)


class TestRecipeStore(ContractTests):
    """The fixture of the recipe's test module, on the store its blocks define."""

    @pytest.fixture
    async def store(self, recipe: ModuleType, embedder: CountingEmbedder) -> AsyncIterator[VectorStore]:
        store: VectorStore = recipe.DictVectorStore(embedder=embedder)
        await store.start()
        yield store
        await store.close()
