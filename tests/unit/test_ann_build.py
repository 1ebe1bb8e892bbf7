"""A background build of the approximate index runs at a lower CPU priority than the requests."""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest

from reme_service.stores.inproc.ann import BUILD_NICE, AnnIndex
from reme_service.stores.params import AnnParams

pytestmark = pytest.mark.anyio


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")
async def test_the_build_thread_is_niced_and_the_caller_is_not() -> None:
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen: list[int] = []

    def stop() -> bool:  # called by the build, in its thread, before each batch
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return False

    rows = np.random.default_rng(0).standard_normal((300, 16)).astype(np.float32)
    ann = await AnnIndex.build_in_background(AnnParams(min_rows=1), rows, len(rows), stop)
    assert ann is not None and len(ann) == 300
    assert seen and set(seen) == {min(19, base + BUILD_NICE)}
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base  # the event loop's thread: untouched
