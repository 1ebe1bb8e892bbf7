"""Workspace ids as Chroma collection names and Elasticsearch index names: injective, and reversible where they can be.

Workspace ids are 1-256 printable characters (`schema/workspace_ids.py`; the encoders take only a validated
`WorkspaceId`); the ids
of earlier versions (`[A-Za-z0-9._-]`) keep the names they had. The backends have their own rules:

* **Chroma** collection names: 3-512 characters from `[A-Za-z0-9._-]`, starting and ending with a letter or digit.
  `chroma_collection_name` keeps ASCII letters, digits and `-`, writes `_` as `_u`, `.` as `_d` and any other
  character as `_x` and 6 hex digits of its code point, and wraps the result as `<prefix><encoded>_e` (an encoding
  over 400 characters is cut and completed by `_h` and a hash; the id is in the collection's metadata).
  Staging and trash names (used while a workspace is replaced) end in `_s<hex>` /
  `_t<hex>` instead, so they never decode to a workspace.
* **Elasticsearch** index names: lower case, at most 255 bytes, no `\\ / * ? " < > | , # :` or spaces, not starting
  with `-`, `_` or `+`. `es_alias_name` keeps lower-case letters, digits, `.` and `-`, writes an upper-case
  letter `X` as `_x`, `_` as `__` and any other character as `_.` and 6 hex digits of its code point, and
  prefixes the result. A workspace is an *alias* of that name pointing at
  one concrete index `<alias>_<generation digits>`: since `_` followed by a digit never occurs in an encoded
  name, an alias can never equal another workspace's index. An encoding too long for Elasticsearch is cut and
  completed by `_0` and a hash of the id (not reversible; the stores keep the id in the index's `_meta`).
"""

from __future__ import annotations

import re

from reme_service.errors import ConfigError
from reme_service.schema.workspace_ids import WorkspaceId, shortened

_CHROMA_ESCAPES = {"_": "_u", ".": "_d"}
_CHROMA_UNESCAPES = {"u": "_", "d": "."}
_CHROMA_PREFIX_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_CHROMA_END = "_e"
_CHROMA_MAX_NAME = 400  # encoded id length; with the prefix and the suffixes it stays under Chroma's 512
_QDRANT_MAX_NAME = 160  # Qdrant collection names: at most 255 bytes, with room for "_g<generation>"

_ES_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.-")
_ES_PREFIX_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_ES_MAX_ALIAS = 200  # leaves room for "_<generation>" under the 255-byte limit
_ES_HASH_MARK = "_0"


def check_chroma_prefix(prefix: str) -> str:
    if not _CHROMA_PREFIX_RE.fullmatch(prefix):
        raise ConfigError(
            f"chroma collection_prefix {prefix!r}: use 1-64 characters from [A-Za-z0-9._-], starting with a letter "
            "or digit"
        )
    return prefix


def check_es_prefix(prefix: str) -> str:
    if not _ES_PREFIX_RE.fullmatch(prefix):
        raise ConfigError(
            f"elasticsearch index_prefix {prefix!r}: use 1-64 characters from [a-z0-9._-], starting with a "
            "lower-case letter or digit"
        )
    return prefix


def _chroma_pieces(workspace_id: WorkspaceId) -> list[str]:
    pieces = []
    for ch in workspace_id:
        if ch in _CHROMA_ESCAPES:
            pieces.append(_CHROMA_ESCAPES[ch])
        elif ch.isascii() and (ch.isalnum() or ch == "-"):
            pieces.append(ch)
        else:  # any other character (e-mail's @, a space, a Chinese name): `_x` and its code point in 6 hex digits
            pieces.append(f"_x{ord(ch):06x}")
    return pieces


def _chroma_encode(workspace_id: WorkspaceId, budget: int = _CHROMA_MAX_NAME) -> str:
    """The encoded id; one longer than `budget` is cut at an escape boundary and completed by `_h` and a hash of
    the id (not reversible: the store keeps the id in the collection's metadata)."""
    return shortened(_chroma_pieces(workspace_id), workspace_id, budget, "_h")


def chroma_collection_name(workspace_id: WorkspaceId, prefix: str = "reme-") -> str:
    """The collection holding a workspace, e.g. `my.ws_1` -> `reme-my_dws_u1_e`, `a@b` -> `reme-a_x000040b_e`."""
    return f"{prefix}{_chroma_encode(workspace_id)}{_CHROMA_END}"


def chroma_temp_name(workspace_id: WorkspaceId, kind: str, token: str, prefix: str = "reme-") -> str:
    """A staging (`kind="s"`) or trash (`kind="t"`) collection name for a workspace; `token` is hex."""
    if kind not in ("s", "t") or not re.fullmatch(r"[0-9a-f]+", token):
        raise ValueError(f"bad temporary collection kind {kind!r} or token {token!r}")
    return f"{prefix}{_chroma_encode(workspace_id)}_{kind}{token}"


def chroma_lock_collection_name(prefix: str = "reme-") -> str:
    """The collection of the stores' cross-process lock records; never decodes to a workspace (no `_e` end)."""
    return f"{prefix}_locks"


def chroma_workspace_id(name: str, prefix: str = "reme-") -> str | None:
    """The workspace a collection name stands for, or None when it is not one of ours."""
    if not name.startswith(prefix) or not name.endswith(_CHROMA_END) or len(name) < len(prefix) + 3:
        return None
    encoded = name[len(prefix) : -len(_CHROMA_END)]
    out: list[str] = []
    i = 0
    while i < len(encoded):
        ch = encoded[i]
        if ch == "_" and encoded[i + 1 : i + 2] == "x":
            code = encoded[i + 2 : i + 8]
            if len(code) != 6 or not re.fullmatch(r"[0-9a-f]{6}", code) or int(code, 16) > 0x10FFFF:
                return None
            out.append(chr(int(code, 16)))
            i += 8
        elif ch == "_":
            decoded = _CHROMA_UNESCAPES.get(encoded[i + 1 : i + 2])
            if decoded is None:
                return None  # `_h`: a hashed long id, or not ours
            out.append(decoded)
            i += 2
        elif ch.isascii() and (ch.isalnum() or ch == "-"):
            out.append(ch)
            i += 1
        else:
            return None
    return "".join(out) or None


def _es_encode(workspace_id: WorkspaceId) -> list[str]:
    """The encoded pieces (one per character of the id), so a cut never splits an escape."""
    pieces = []
    for ch in workspace_id:
        if ch == "_":
            pieces.append("__")
        elif "A" <= ch <= "Z":
            pieces.append("_" + ch.lower())
        elif ch in _ES_PLAIN:
            pieces.append(ch)
        else:  # any other character: `_.` and its code point in 6 hex digits (`_` + digit stays unused)
            pieces.append(f"_.{ord(ch):06x}")
    return pieces


def es_alias_name(workspace_id: WorkspaceId, prefix: str = "reme-") -> str:
    """The alias naming a workspace, e.g. `My_ws` -> `reme-_my__ws`."""
    return prefix + shortened(_es_encode(workspace_id), workspace_id, _ES_MAX_ALIAS - len(prefix), _ES_HASH_MARK)


def es_lock_index_name(prefix: str = "reme-") -> str:
    """The index of the stores' cross-process lock records. No alias can equal it: in an encoded id `_` is followed
    by `_` or a letter, and the hash mark `_0` by 16 hex digits; no concrete index either (those end in digits)."""
    return f"{prefix}_0locks"


def es_index_name(alias: str, generation: int) -> str:
    """The concrete index behind `alias` for one generation (a new one each time a workspace is replaced)."""
    return f"{alias}_{generation}"


def es_workspace_id(alias: str, prefix: str = "reme-") -> str | None:
    """The workspace an alias stands for, or None (not ours, a concrete index name, or a hashed long name)."""
    if not alias.startswith(prefix):
        return None
    encoded = alias[len(prefix) :]
    out: list[str] = []
    i = 0
    while i < len(encoded):
        ch = encoded[i]
        if ch == "_":
            nxt = encoded[i + 1 : i + 2]
            if nxt == ".":
                code = encoded[i + 2 : i + 8]
                if len(code) != 6 or not re.fullmatch(r"[0-9a-f]{6}", code) or int(code, 16) > 0x10FFFF:
                    return None
                out.append(chr(int(code, 16)))
                i += 8
                continue
            if nxt == "_":
                out.append("_")
            elif "a" <= nxt <= "z":
                out.append(nxt.upper())
            else:
                return None
            i += 2
        elif ch in _ES_PLAIN:
            out.append(ch)
            i += 1
        else:
            return None
    return "".join(out) or None


def qdrant_alias_name(workspace_id: WorkspaceId, prefix: str = "reme-") -> str:
    """The Qdrant alias of a workspace: the Chroma encoding, kept under Qdrant's name limits (a long id is hashed)."""
    return f"{prefix}{_chroma_encode(workspace_id, _QDRANT_MAX_NAME)}{_CHROMA_END}"


def qdrant_workspace_id(alias: str, prefix: str = "reme-") -> str | None:
    """The workspace a Qdrant alias stands for (None: not ours, or a hashed long id)."""
    return chroma_workspace_id(alias, prefix)
