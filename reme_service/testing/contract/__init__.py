"""The store contract as pytest test classes, one per capability, for any `VectorStore` backend.

A store's test module subclasses `ContractTests` (every capability) or the capabilities it picks, and provides a
`store` fixture built with the `embedder` fixture (see `support.py`)::

    class TestMyStore(ContractTests):
        @pytest.fixture
        async def store(self, embedder: CountingEmbedder) -> AsyncIterator[MyStore]:
            store = MyStore(embedder=embedder)
            await store.start()
            yield store
            await store.close()

The tests run under anyio (its pytest plugin, with the `anyio_backend` fixture the project's conftest gives).
A store not built on `TemplateVectorStore` sets `MID_WRITE` (`ContractBase`) for the concurrency tests.
"""

import pytest

pytest.register_assert_rewrite(
    *(f"{__name__}.{part}" for part in ("concurrency", "delete", "filters", "hybrid", "listing", "replace"))
)
pytest.register_assert_rewrite(
    *(f"{__name__}.{part}" for part in ("search", "spaces", "summary", "workspaces", "writes"))
)

from reme_service.testing.contract.concurrency import ConcurrencyContract  # noqa: E402
from reme_service.testing.contract.delete import DeleteContract  # noqa: E402
from reme_service.testing.contract.filters import FilterContract  # noqa: E402
from reme_service.testing.contract.hybrid import HybridContract  # noqa: E402
from reme_service.testing.contract.listing import ListingContract  # noqa: E402
from reme_service.testing.contract.replace import ReplaceCopyContract  # noqa: E402
from reme_service.testing.contract.search import SearchContract  # noqa: E402
from reme_service.testing.contract.spaces import EmbeddingSpaceContract  # noqa: E402
from reme_service.testing.contract.summary import SummaryContract  # noqa: E402
from reme_service.testing.contract.support import ContractBase  # noqa: E402
from reme_service.testing.contract.workspaces import WorkspaceContract  # noqa: E402
from reme_service.testing.contract.writes import UpsertGetContract  # noqa: E402


class ContractTests(
    WorkspaceContract,
    UpsertGetContract,
    DeleteContract,
    SearchContract,
    FilterContract,
    HybridContract,
    ListingContract,
    SummaryContract,
    ReplaceCopyContract,
    EmbeddingSpaceContract,
    ConcurrencyContract,
):
    """The whole store contract: every capability's tests."""


__all__ = [
    "ConcurrencyContract",
    "ContractBase",
    "ContractTests",
    "DeleteContract",
    "EmbeddingSpaceContract",
    "FilterContract",
    "HybridContract",
    "ListingContract",
    "ReplaceCopyContract",
    "SearchContract",
    "SummaryContract",
    "UpsertGetContract",
    "WorkspaceContract",
]
