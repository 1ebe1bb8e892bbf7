"""The documents and queries of the Elasticsearch-protocol test server (`tests/fakes/es_server.py`): an index's
state, mapping checks on indexed documents, query evaluation (with BM25 for `match`), `_source` filtering and
sort keys. Semantics follow Elasticsearch; see the server module for the list of what is covered."""

from __future__ import annotations

import base64
import binascii
import fnmatch
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

MAX_RESULT_WINDOW = 10_000
_TOKEN = re.compile(r"\w+", re.UNICODE)


class EsError(Exception):
    def __init__(self, status: int, type_: str, reason: str) -> None:
        super().__init__(reason)
        self.status, self.type, self.reason = status, type_, reason

    def body(self) -> dict[str, Any]:
        cause = {"type": self.type, "reason": self.reason}
        return {"error": {"root_cause": [cause], **cause}, "status": self.status}


@dataclass
class Index:
    name: str
    mappings: dict[str, Any]
    settings: dict[str, Any]
    docs: dict[str, dict[str, Any]] = field(default_factory=dict)  # latest (realtime get)
    visible: dict[str, dict[str, Any]] = field(default_factory=dict)  # as of the last refresh (search)
    versions: Counter[str] = field(default_factory=Counter)
    seq_no: int = 0
    doc_seq: dict[str, int] = field(default_factory=dict)  # each live document's _seq_no (for if_seq_no)
    # query results over `visible`, valid until the next refresh (Elasticsearch caches filters per segment too)
    cache: dict[bytes, list[tuple[str, float]]] = field(default_factory=dict)

    def props(self) -> dict[str, Any]:
        return self.mappings.get("properties", {})

    def refresh(self) -> None:
        self.visible = dict(self.docs)
        self.cache = {}

    def matching(self, query: dict[str, Any]) -> list[tuple[str, float]]:
        """`(id, score)` of the visible documents matching `query`, in storage order."""
        key = orjson.dumps(query, option=orjson.OPT_SORT_KEYS)
        found = self.cache.get(key)
        if found is None:
            searcher = Searcher(self)
            found = []
            for doc_id, source in self.visible.items():
                searcher.current_id = doc_id
                ok, score = searcher.evaluate(query, source)
                if ok:
                    found.append((doc_id, score))
            self.cache[key] = found
        return found


def truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("", "true", "wait_for")


# ----- document checks -----


def _check_field(name: str, spec: dict[str, Any], value: Any, doc_id: str) -> None:
    kind = spec.get("type", "object")
    if value is None:
        return
    bad = False
    if kind == "keyword":
        bad = isinstance(value, dict | list)
    elif kind == "text":
        bad = not isinstance(value, str)
    elif kind == "long":
        bad = isinstance(value, bool) or not isinstance(value, int)
    elif kind == "double":
        bad = isinstance(value, bool) or not isinstance(value, int | float)
    elif kind == "boolean":
        bad = not isinstance(value, bool)
    elif kind == "binary":
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, TypeError, ValueError):
            bad = True
    elif kind == "dense_vector":
        _check_vector(name, spec, value, doc_id)
    if bad:
        raise EsError(
            400,
            "document_parsing_exception",
            f"failed to parse field [{name}] of type [{kind}] in document with id '{doc_id}'",
        )


def _check_vector(name: str, spec: dict[str, Any], value: Any, doc_id: str) -> None:
    if not isinstance(value, list) or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in value):
        raise EsError(400, "document_parsing_exception", f"failed to parse field [{name}] of type [dense_vector]")
    dims = spec.get("dims")
    if dims is not None and len(value) != dims:
        raise EsError(
            400,
            "document_parsing_exception",
            f"The [dense_vector] field [{name}] in doc [document with id '{doc_id}'] has a different number of "
            f"dimensions [{len(value)}] than defined in the mapping [{dims}]",
        )
    if spec.get("similarity") == "cosine" and not any(value):
        raise EsError(
            400, "document_parsing_exception", "The [cosine] similarity does not support vectors with zero magnitude."
        )


def check_object(props: dict[str, Any], source: dict[str, Any], dynamic: Any, doc_id: str, where: str) -> None:
    for key, value in source.items():
        spec = props.get(key)
        if spec is None:
            if str(dynamic) == "strict":
                raise EsError(
                    400,
                    "strict_dynamic_mapping_exception",
                    f"[1:2] mapping set to strict, dynamic introduction of [{key}] within [{where}] is not allowed",
                )
            continue
        if spec.get("type") == "nested" or "properties" in spec:
            if spec.get("enabled", True) is False:
                continue
            items = value if isinstance(value, list) else [value]
            for item in items:
                if not isinstance(item, dict):
                    raise EsError(400, "document_parsing_exception", f"object mapping [{key}] got a non-object value")
                check_object(spec.get("properties", {}), item, spec.get("dynamic", dynamic), doc_id, key)
        elif spec.get("type") == "object" and spec.get("enabled") is False:
            if not isinstance(value, dict):
                raise EsError(400, "document_parsing_exception", f"object mapping [{key}] got a non-object value")
        else:
            _check_field(key, spec, value, doc_id)


# ----- queries -----


def _field_spec(props: dict[str, Any], path: str) -> dict[str, Any] | None:
    spec: dict[str, Any] | None = {"properties": props}
    for part in path.split("."):
        spec = (spec or {}).get("properties", {}).get(part)
        if spec is None:
            return None
    return spec


def _coerce(kind: str, value: Any) -> Any:
    if kind == "keyword":
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value) if not isinstance(value, str) else value
    if kind in ("double", "long"):
        if isinstance(value, bool):
            raise EsError(400, "query_shard_exception", f"failed to create query: cannot parse [{value}] as a number")
        return float(value)
    if kind == "boolean":
        if isinstance(value, str):
            return value == "true"
        return bool(value)
    return value


def field_values(obj: dict[str, Any], path: str) -> list[Any]:
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, dict):
            return []
        value = value.get(part)
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


class Searcher:
    """Evaluates queries over one index's visible documents."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self.props = index.props()
        self._stats: dict[str, tuple[int, float, Counter[str]]] = {}
        self.current_id = ""
        self._kinds: dict[str, str] = {}
        self._limits: dict[str, int] = {}

    def _kind(self, path: str) -> str:
        kind = self._kinds.get(path)
        if kind is None:
            spec = _field_spec(self.props, path)
            kind = self._kinds[path] = spec.get("type", "object") if spec else "unmapped"
            self._limits[path] = (spec or {}).get("ignore_above", 1 << 30)
        return kind

    def _stored(self, obj: dict[str, Any], path: str, rel: str) -> list[Any]:
        kind = self._kind(path)
        if kind in ("unmapped", "object", "text", "dense_vector", "binary"):
            return []
        limit = self._limits[path]
        out = []
        for value in field_values(obj, rel):
            if kind == "keyword" and isinstance(value, str) and len(value) > limit:
                continue  # not indexed
            out.append(_coerce(kind, value))
        return out

    def evaluate(self, query: dict[str, Any], obj: dict[str, Any], prefix: str = "") -> tuple[bool, float]:
        """(matches, score) of `query` on a document or nested object (`prefix`: the nested path)."""
        if len(query) != 1:
            raise EsError(400, "parsing_exception", f"query malformed, expected one clause: {list(query)}")
        ((name, spec),) = query.items()
        method = getattr(self, f"_q_{name}", None)
        if method is None:
            raise EsError(400, "unsupported_by_test_server", f"query [{name}] is not implemented by the test server")
        return method(spec, obj, prefix)

    def _rel(self, path: str, prefix: str) -> str:
        return path[len(prefix) + 1 :] if prefix and path.startswith(prefix + ".") else path

    def _q_match_all(self, spec: Any, obj: dict[str, Any], prefix: str) -> tuple[bool, float]:
        return True, float(spec.get("boost", 1.0)) if isinstance(spec, dict) else 1.0

    def _q_bool(self, spec: dict[str, Any], obj: dict[str, Any], prefix: str) -> tuple[bool, float]:
        score = 0.0
        for clause in as_list(spec.get("filter")):
            if not self.evaluate(clause, obj, prefix)[0]:
                return False, 0.0
        for clause in as_list(spec.get("must")):
            ok, s = self.evaluate(clause, obj, prefix)
            if not ok:
                return False, 0.0
            score += s
        for clause in as_list(spec.get("must_not")):
            if self.evaluate(clause, obj, prefix)[0]:
                return False, 0.0
        should = as_list(spec.get("should"))
        default_msm = 0 if (spec.get("filter") or spec.get("must")) else 1
        msm = int(spec.get("minimum_should_match", default_msm if should else 0))
        hits = 0
        for clause in should:
            ok, s = self.evaluate(clause, obj, prefix)
            if ok:
                hits += 1
                score += s
        if hits < msm:
            return False, 0.0
        return True, score

    def _term_args(self, spec: dict[str, Any]) -> tuple[str, Any]:
        ((path, value),) = spec.items()
        if isinstance(value, dict):
            value = value.get("value")
        return path, value

    def _q_term(self, spec: dict[str, Any], obj: dict[str, Any], prefix: str) -> tuple[bool, float]:
        path, value = self._term_args(spec)
        kind = self._kind(path)
        if kind in ("unmapped", "text"):
            return False, 0.0
        return _coerce(kind, value) in self._stored(obj, path, self._rel(path, prefix)), 1.0

    def _q_terms(self, spec: dict[str, Any], obj: dict[str, Any], prefix: str) -> tuple[bool, float]:
        ((path, values),) = ((k, v) for k, v in spec.items() if k != "boost")
        kind = self._kind(path)
        if kind in ("unmapped", "text"):
            return False, 0.0
        wanted = {_coerce(kind, v) for v in values}
        return any(v in wanted for v in self._stored(obj, path, self._rel(path, prefix))), 1.0

    def _q_range(self, spec: dict[str, Any], obj: dict[str, Any], prefix: str) -> tuple[bool, float]:
        ((path, bounds),) = spec.items()
        kind = self._kind(path)
        ops = {
            "gt": lambda a, b: a > b,
            "gte": lambda a, b: a >= b,
            "lt": lambda a, b: a < b,
            "lte": lambda a, b: a <= b,
        }
        for value in self._stored(obj, path, self._rel(path, prefix)):
            if kind == "keyword":
                value = value.encode()  # Lucene compares terms as UTF-8 bytes
            if all(
                ops[op](value, _coerce(kind, b).encode() if kind == "keyword" else _coerce(kind, b))
                for op, b in bounds.items()
                if op in ops
            ):
                return True, 1.0
        return False, 0.0

    def _q_ids(self, spec: dict[str, Any], obj: dict[str, Any], prefix: str) -> tuple[bool, float]:
        return self.current_id in set(spec.get("values", [])), 1.0

    def _q_exists(self, spec: dict[str, Any], obj: dict[str, Any], prefix: str) -> tuple[bool, float]:
        path = spec["field"]
        return bool(field_values(obj, self._rel(path, prefix))), 1.0

    def _q_nested(self, spec: dict[str, Any], obj: dict[str, Any], prefix: str) -> tuple[bool, float]:
        path = spec["path"]
        if self._kind(path) != "nested":
            raise EsError(400, "query_shard_exception", f"[nested] failed to find nested object under path [{path}]")
        best = None
        for child in field_values(obj, self._rel(path, prefix)):
            ok, score = self.evaluate(spec["query"], child, path)
            if ok:
                best = max(best or 0.0, score)
        return best is not None, best or 0.0

    def _q_match(self, spec: dict[str, Any], obj: dict[str, Any], prefix: str) -> tuple[bool, float]:
        ((path, text),) = spec.items()
        if isinstance(text, dict):
            text = text.get("query", "")
        terms = _tokens(str(text))
        if self._kind(path) != "text":
            return False, 0.0
        doc_terms = Counter(_tokens(" ".join(str(v) for v in field_values(obj, path))))
        count, avgdl, df = self._bm25_stats(path)
        length = sum(doc_terms.values())
        score, matched = 0.0, False
        for term in terms:
            tf = doc_terms.get(term, 0)
            if not tf:
                continue
            matched = True
            idf = math.log(1 + (count - df[term] + 0.5) / (df[term] + 0.5))
            score += idf * tf / (tf + 1.2 * (1 - 0.75 + 0.75 * length / (avgdl or 1.0)))
        return matched, score

    def _bm25_stats(self, path: str) -> tuple[int, float, Counter[str]]:
        if path not in self._stats:
            df: Counter[str] = Counter()
            total = 0
            docs = self.index.visible.values()
            for doc in docs:
                tokens = _tokens(" ".join(str(v) for v in field_values(doc, path)))
                total += len(tokens)
                df.update(set(tokens))
            count = len(self.index.visible)
            self._stats[path] = (count, total / count if count else 0.0, df)
        return self._stats[path]


def as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _tokens(text: str) -> list[str]:
    return [t.lower() for t in _TOKEN.findall(text)]


def filter_source(source: dict[str, Any], spec: Any, includes: list[str], excludes: list[str]) -> Any:
    if spec is False:
        return None
    if isinstance(spec, str):
        includes = [spec]
    elif isinstance(spec, list):
        includes = spec
    elif isinstance(spec, dict):
        includes = as_list(spec.get("includes") or spec.get("include"))
        excludes = as_list(spec.get("excludes") or spec.get("exclude"))
    out = {}
    for key, value in source.items():
        if includes and not any(fnmatch.fnmatchcase(key, pattern) for pattern in includes):
            continue
        if any(fnmatch.fnmatchcase(key, pattern) for pattern in excludes):
            continue
        out[key] = value
    return out


def split(value: str | None) -> list[str]:
    return [part for part in (value or "").split(",") if part]


def sort_key(spec: Any) -> tuple[str, str]:
    if isinstance(spec, str):
        return spec, "asc"
    ((name, order),) = spec.items()
    if isinstance(order, dict):
        order = order.get("order", "asc")
    return name, order


def sort_value(source: dict[str, Any], name: str) -> Any:
    found = field_values(source, name)
    return found[0] if found else None


def sort_order(values: tuple[Any, ...], keys: list[tuple[str, str]]) -> tuple[Any, ...]:
    """A comparable key: missing values last, descending fields negated (numbers) or inverted (strings)."""
    out: list[Any] = []
    for value, (_, direction) in zip(values, keys, strict=True):
        if value is None:
            out.append((1, 0))
        elif direction == "desc":
            out.append((0, -value if isinstance(value, int | float) else _Desc(value)))
        else:
            out.append((0, value))
    return tuple(out)


class _Desc:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: _Desc) -> bool:
        return self.value > other.value

    def __gt__(self, other: _Desc) -> bool:
        return self.value < other.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)
