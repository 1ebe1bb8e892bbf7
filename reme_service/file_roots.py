"""Where `vector_store` `dump` and `load` may read and write library files, and how clients name those files.

A root has a name, a directory and a mode. By default there are two:

* `libraries` → `<data_dir>/libraries`, read-write: dumps go here, and any library a client puts here loads;
* `docs/library` → the memory libraries shipped with the service, read-only (a dump there is a 403).

A client path is read against the roots: one that starts with a root's name (`docs/library/agent_runs.jsonl`,
`libraries/team`) lies in that root; any other relative path lies in the first writable root (`team.jsonl` is
`<data_dir>/libraries/team.jsonl`); an absolute path must already lie inside a root. The server's working
directory is not a root. Configuring `file_roots` replaces the defaults with the directories listed (each
read-write, named by the path as written).

A caller with an API key for some workspaces (not `*`) reads and writes its workspace's own folder of each
writable root (`<root>/workspaces/<workspace id>`, `for_workspace`), as it does for working-memory files: a key for
one workspace can neither read another workspace's dump nor overwrite it, nor learn that it exists. Clients still
name the folder `libraries/...`; read-only roots (the shipped libraries) are shared. Trusted callers (no keys,
stdio, the Python API) and keys of every workspace (`*`, an operator's) see the roots whole.

A path is judged by where it *resolves*, symlinks followed, and a file is checked again once it is open (the path
of the open descriptor, from /proc), so neither `..`, nor a symlink inside a root that points outside, nor a
swap of the file between the check and the open reaches outside: 403. Clients only ever see paths as
`<root name>/<path inside the root>` (`display`), never where the server keeps them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from reme_service.errors import InvalidRequestError, PathNotAllowedError
from reme_service.schema.paths import path_problem
from reme_service.schema.workspace_ids import WorkspaceId, file_name

#: the libraries that ship with the service (a source checkout's docs/library)
PACKAGED_LIBRARIES = Path(__file__).resolve().parent.parent / "docs" / "library"


@dataclass(frozen=True)
class FileRoot:
    name: str
    path: Path  # resolved
    writable: bool


class FileRoots:
    def __init__(self, roots: list[FileRoot]) -> None:
        if not roots:
            raise ValueError("at least one file root is needed")
        self.roots = roots

    @classmethod
    def defaults(cls, data_dir: Path) -> FileRoots:
        roots = [FileRoot("libraries", (data_dir / "libraries").resolve(), writable=True)]
        if PACKAGED_LIBRARIES.is_dir():
            roots.append(FileRoot("docs/library", PACKAGED_LIBRARIES, writable=False))
        return cls(roots)

    @classmethod
    def configured(cls, paths: list[str]) -> FileRoots:
        return cls([FileRoot(raw.rstrip("/") or raw, Path(raw).expanduser().resolve(), writable=True) for raw in paths])

    def for_workspace(self, workspace_id: WorkspaceId) -> FileRoots:
        """The roots as a caller with a key for `workspace_id` sees them: each writable root narrowed to the
        workspace's folder in it (same name, so `libraries/team.jsonl` is `<root>/workspaces/<id>/team.jsonl`),
        the read-only ones whole."""
        folder = ("workspaces", file_name(workspace_id))
        return FileRoots([FileRoot(r.name, r.path.joinpath(*folder), True) if r.writable else r for r in self.roots])

    def prepare(self) -> None:
        """Create the writable roots that do not exist yet (blocking)."""
        for root in self.roots:
            if root.writable:
                root.path.mkdir(parents=True, exist_ok=True)

    def _root_of(self, resolved: Path) -> FileRoot | None:
        for root in self.roots:
            if resolved == root.path or resolved.is_relative_to(root.path):
                return root
        return None

    def resolve(self, client_path: str, *, write: bool) -> Path:
        """The absolute path `client_path` names; 400 for a path no file system takes, 403 outside every root or
        (with `write`) inside a read-only one."""
        problem = path_problem(client_path)
        if problem is not None:
            raise InvalidRequestError(f"path {problem}", details={"field": "path"})
        given = client_path.strip()
        if os.path.isabs(given) or given.startswith("~"):
            candidate = Path(given).expanduser()
        else:
            candidate = self._candidate(given)
        root = self._root_of(candidate.resolve())
        if root is None:
            names = [repr(r.name) for r in self.roots if not os.path.isabs(r.name)]  # configured roots stay unnamed
            hint = f"; name a file in {' or '.join(names)}" if names else ""
            raise PathNotAllowedError(f"path {client_path!r} lies outside the library directories{hint}")
        if write and not root.writable:
            raise PathNotAllowedError(f"path {client_path!r} is in {root.name!r}, which is read-only")
        return candidate.resolve()

    def _candidate(self, relative: str) -> Path:
        parts = Path(relative).parts
        for root in self.roots:
            name = Path(root.name).parts
            if tuple(parts[: len(name)]) == name:
                return root.path.joinpath(*parts[len(name) :])
        default = next((r for r in self.roots if r.writable), self.roots[0])
        return default.path / relative

    def check_open(self, fd: int, client_path: str) -> None:
        """403 unless the file open as `fd` lies inside a root (what was opened, not what was checked before)."""
        try:
            real = Path(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # no /proc (not Linux): the check of the resolved path before opening stands
            return
        if self._root_of(real) is None:
            raise PathNotAllowedError(f"path {client_path!r} lies outside the library directories")

    def display(self, path: Path) -> str:
        """How a client sees `path`: `<root name>/<path inside the root>`."""
        root = self._root_of(path)
        if root is None:
            return path.name
        inside = path.relative_to(root.path).as_posix()
        return root.name if inside == "." else f"{root.name}/{inside}"
