"""`QuantizedRows`: an int8 copy of a workspace's rows that makes an exact search's scan cheaper.

An exact search scores every row. Over the float32 matrix that reads 1,536 bytes a row (`np.vecdot`, bound by
memory bandwidth: 10k x 384 in ~0.32 ms on this machine). This copy holds each row as int8 codes with a scale of its
own (`code = rint(x / step)`, `step = max|x| / 127`), packed by numkong for its integer dot-product kernel (AVX-512
VNNI here): the same 10k rows in ~0.075 ms while the copy stays in the CPU's cache (~0.3 ms when it must come from
RAM). Past the cache the packed kernel reads memory slowly: 100k rows take ~3-4 ms against the float32 scan's ~5.3
(numkong's `cdist` over plain int8 rows would take ~1.7; not done yet). The scan only proposes candidates. Each
row's approximate score comes with a bound on its error, and the store re-scores exactly, from the float32 matrix,
every row whose upper bound reaches the k-th best lower bound (`WorkspaceState.scan_top`), so the answer is the one
a full float32 scan gives.

The bound. With q̂, m̂ the dequantised query and row, δq = q - q̂ and δm = m - m̂:
q·m - q̂·m̂ = q̂·δm + δq·m, so |q·m - q̂·m̂| <= |q̂|·|δm| + |δq|·|m| (Cauchy-Schwarz). |δm| and |m| are kept per row
(`error`, `norm`), |q̂| and |δq| are computed per search, and `ROUNDING` covers the float32 arithmetic of both scans
(a 384-term float32 dot product is off by at most ~2e-5). On unit rows of 384 dimensions the bound is ~0.02 while the
true error stays under ~0.002; a search then re-scores a few dozen rows.

Blocks. The rows are packed in blocks of `BLOCK_ROWS`. A write marks the blocks of the rows it changed (`mark`) and
`sync` re-quantises and re-packs those from the matrix (~0.4 ms a block); the store syncs at the end of each write, so
a search finds the copy current. Rows past the live count (left by deletes) are scored and ignored. Memory: ~396
bytes a row of 384 dimensions (the packed codes and three float32s) beside the matrix's 1,536.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numkong
import numpy as np
from numpy.typing import NDArray

BLOCK_ROWS = 1_024
LEVELS = 127  # int8 codes in [-127, 127]
ROUNDING = 1e-4  # float32 rounding of the exact and the approximate dot products, with a wide margin


def _quantise(rows: NDArray[np.float32]) -> tuple[NDArray[np.int8], NDArray[np.float32], NDArray[np.float32]]:
    """The codes of `rows`, each row's step (`max|x| / LEVELS`, 0 for a zero row) and the norm of its error."""
    step = (np.abs(rows).max(axis=1) / LEVELS).astype(np.float32)
    safe = np.where(step > 0, step, np.float32(1.0))
    codes = np.clip(np.rint(rows / safe[:, None]), -LEVELS, LEVELS).astype(np.int8)
    restored = codes.astype(np.float64) * step.astype(np.float64)[:, None]  # what the scan's score is made of
    error = np.linalg.norm(rows.astype(np.float64) - restored, axis=1)
    return codes, step, error.astype(np.float32)


class QuantizedRows:
    """The int8 copy of rows `[0, size)` of a matrix (module docstring). Writes (`mark`, then `sync`) run where the
    rows change, under the workspace's exclusive gate, so never beside a search; `scores` may run in several threads
    at once (it only reads)."""

    __slots__ = ("step", "error", "norm", "_packed", "_stale")

    def __init__(self) -> None:
        self.step = np.zeros(0, np.float32)  # per row: the value of one code step
        self.error = np.zeros(0, np.float32)  # per row: |row - dequantised row|
        self.norm = np.zeros(0, np.float32)  # per row: |row|
        self._packed: list[Any] = []  # per block: numkong's packed codes of its rows
        self._stale: set[int] = set()  # blocks whose rows changed since they were packed

    @classmethod
    def of(cls, matrix: NDArray[np.float32], size: int) -> QuantizedRows:
        """The copy of `matrix[:size]`."""
        rows = cls()
        rows.mark(range(0, size, BLOCK_ROWS))
        rows.sync(matrix, size)
        return rows

    def nbytes(self) -> int:
        packed = sum(int(block.nbytes) for block in self._packed if block is not None)
        return packed + self.step.nbytes + self.error.nbytes + self.norm.nbytes

    def mark(self, rows: Iterable[int]) -> None:
        """Rows that were written (or appended): their blocks are re-packed by the next `sync`."""
        self._stale.update(row // BLOCK_ROWS for row in rows)

    def sync(self, matrix: NDArray[np.float32], size: int) -> None:
        """Re-pack the marked blocks from `matrix[:size]`."""
        if not self._stale:
            return
        blocks = -(-size // BLOCK_ROWS)
        capacity = blocks * BLOCK_ROWS
        if len(self.step) < capacity:
            self.step, self.error, self.norm = (
                np.concatenate([array, np.zeros(capacity - len(array), np.float32)])
                for array in (self.step, self.error, self.norm)
            )
        if len(self._packed) < blocks:
            self._packed.extend([None] * (blocks - len(self._packed)))
        for block in sorted(self._stale):
            start = block * BLOCK_ROWS
            end = min(start + BLOCK_ROWS, size)
            if start >= end:
                continue
            rows = matrix[start:end]
            codes, step, error = _quantise(rows)
            self.step[start:end] = step
            self.error[start:end] = error
            self.norm[start:end] = np.linalg.norm(rows.astype(np.float64), axis=1)
            self._packed[block] = numkong.dots_pack(codes)
        self._stale.clear()

    def scores(self, query: NDArray[np.float32], size: int) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        """Each row's approximate dot product with `query` and the bound on its error (module docstring)."""
        codes, step, error = _quantise(query[None, :])
        dots = np.empty(len(self._packed) * BLOCK_ROWS, np.int32)
        for block, packed in enumerate(self._packed):
            start = block * BLOCK_ROWS
            if start >= size:
                break
            found = np.asarray(numkong.dots_packed(codes, packed))[0]
            dots[start : start + len(found)] = found
        q_step = float(step[0])
        q_norm = float(np.linalg.norm(codes[0].astype(np.float64))) * q_step
        approx = dots[:size].astype(np.float32)  # exact: |dots| <= dim * 127² < 2^24
        approx *= self.step[:size]
        approx *= np.float32(q_step)
        slack = self.error[:size] * np.float32(q_norm)
        slack += self.norm[:size] * np.float32(error[0])
        slack += np.float32(ROUNDING)
        return approx, slack
