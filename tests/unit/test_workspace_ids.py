"""Workspace ids: any printable id of 1-256 characters but '/' and '\\', encoded reversibly into file, Chroma and
Elasticsearch names; the ids of earlier versions keep exactly the names they had."""

from __future__ import annotations

import pytest

from reme_service.errors import InvalidRequestError
from reme_service.schema.workspace_ids import (
    HASH_MARK,
    WorkspaceId,
    file_name,
    validate_workspace_id,
    workspace_from_file_name,
)
from reme_service.stores.names import chroma_collection_name, chroma_workspace_id, es_alias_name, es_workspace_id

NEW_IDS = [WorkspaceId(w) for w in ("alice@example.com", "张三", "John Smith", "Alice", "alice", "ünïcödé-ü", "a%41")]
NEW_IDS += [WorkspaceId(w) for w in ("x~y", "😀 emoji", "_.-")]
OLD_IDS = [WorkspaceId(w) for w in ("default", "team-1", "my.ws_1", "A_B.c-d", "ws", ".hidden", "x" * 128)]


@pytest.mark.parametrize("workspace_id", NEW_IDS + OLD_IDS)
def test_every_encoding_round_trips(workspace_id: WorkspaceId) -> None:
    assert validate_workspace_id(workspace_id) == workspace_id
    assert workspace_from_file_name(file_name(workspace_id)) == workspace_id
    assert chroma_workspace_id(chroma_collection_name(workspace_id)) == workspace_id
    assert es_workspace_id(es_alias_name(workspace_id)) == workspace_id


def test_names_are_distinct_even_when_ids_differ_only_in_case() -> None:
    for encode in (file_name, chroma_collection_name, es_alias_name):
        names = [encode(workspace_id) for workspace_id in NEW_IDS + OLD_IDS]
        assert len(set(names)) == len(names), encode.__name__


def test_old_ids_keep_their_names() -> None:
    for workspace_id in OLD_IDS:
        assert file_name(workspace_id) == workspace_id  # the local store's <id>.snap / <id>.wal of earlier versions
    assert chroma_collection_name(WorkspaceId("my.ws_1")) == "reme-my_dws_u1_e"
    assert es_alias_name(WorkspaceId("My_ws")) == "reme-_my__ws"


def test_names_keep_to_each_backend_alphabet() -> None:
    for workspace_id in NEW_IDS:
        assert all(ch.isascii() and (ch.isalnum() or ch in "._-%") for ch in file_name(workspace_id))
        collection = chroma_collection_name(workspace_id)
        assert all(ch.isascii() and (ch.isalnum() or ch in "._-") for ch in collection) and collection[-1].isalnum()
        alias = es_alias_name(workspace_id)
        assert alias == alias.lower() and not set(alias) & set('\\/*?"<>|,#: ') and alias.isascii()


def test_a_long_id_gets_a_hashed_name_within_the_limits() -> None:
    long_id = WorkspaceId("长" * 256)
    name = file_name(long_id)
    assert HASH_MARK in name and len(name.encode()) <= 200 and workspace_from_file_name(name) is None
    assert file_name(WorkspaceId("长" * 255 + "短")) != name
    assert len(chroma_collection_name(long_id)) <= 512 and chroma_workspace_id(chroma_collection_name(long_id)) is None
    assert len(es_alias_name(long_id).encode()) <= 255


@pytest.mark.parametrize(
    "bad", ["", "a/b", "a\\b", "tab\there", "line\nbreak", "nul\x00", "\u2028", "..", "." * 5, "x" * 257, "del\x7f"]
)
def test_invalid_ids_are_400_naming_the_field(bad: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        validate_workspace_id(bad)
    assert caught.value.details == {"field": "workspace_id"}


def test_names_that_are_not_encodings_decode_to_nothing() -> None:
    for name in ("a%4", "a%zz", "%C3", "a b", "lower%41x"):  # a truncated escape, bad hex, half a character, ...
        assert workspace_from_file_name(name) is None, name
