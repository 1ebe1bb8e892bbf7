"""onnxruntime and usearch in one process, the store's ANN index imported first (a fresh interpreter each time).

usearch loads NumKong with RTLD_GLOBAL, which exports copies of libstdc++'s symbols: an onnxruntime loaded after
it bound to them and crashed at import. `reme_service.stores.inproc.ann` loads onnxruntime before usearch.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import numpy as np
import reme_service.stores.inproc.quantized  # numkong imported directly (not through usearch) first
import reme_service.stores.inproc.ann  # usearch, and NumKong's symbols, next
from reme_service.providers.embedding.bert_graph import EncoderGraph
from usearch.index import Index

index = Index(ndim=4)
index.add(7, np.ones(4, dtype=np.float32))
print(len(index), EncoderGraph.__name__)
"""


@pytest.mark.slow
def test_the_embedder_loads_after_the_ann_index() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stderr[-2000:]}"
    assert done.stdout.split() == ["1", "EncoderGraph"]
