"""The embedding-client contract."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray


class EmbeddingClient(ABC):
    """Turns texts into vectors.

    `embed` returns a float32 array of shape `(len(texts), dimensions)` whose rows are L2-normalised, in the
    order of `texts`. It raises `EmbeddingError` (a 502) when the provider fails after its retries, or returns
    the wrong number or size of vectors. CPU-heavy backends run off the event loop.
    """

    backend: str = "abstract"
    model_name: str = ""

    @property
    @abstractmethod
    def dimensions(self) -> int: ...

    @abstractmethod
    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]: ...

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Load weights / open clients."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources."""

    async def health(self) -> dict[str, Any]:
        return {"status": "ok", "backend": self.backend, "model": self.model_name, "dimensions": self.dimensions}


def normalise_rows(matrix: NDArray[np.float32]) -> NDArray[np.float32]:
    """L2-normalise each row; zero rows stay zero."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    normalised: NDArray[np.float32] = (matrix / norms).astype(np.float32, copy=False)
    return normalised
