"""Memories, messages and the memory <-> node mapping, including ReMe's library format."""

from __future__ import annotations

import json

import orjson
import pytest
from pydantic import ValidationError

from reme_service.schema.memory import (
    PersonalMemory,
    TaskMemory,
    ToolCallResult,
    ToolMemory,
    memory_from_dict,
    memory_from_node,
)
from reme_service.schema.messages import Message, Trajectory
from tests.conftest import shared_file


def test_task_memory_round_trips_through_a_vector_node() -> None:
    memory = TaskMemory(workspace_id="ws", when_to_use="when X", content="do Y", score=0.8, metadata={"freq": 2})
    node = memory.to_vector_node()
    assert node.unique_id == memory.memory_id
    assert node.content == "when X"  # the embedded text is when_to_use
    assert node.metadata["content"] == "do Y"
    back = memory_from_node(node)
    assert back == memory


def test_personal_and_tool_memories_keep_their_fields() -> None:
    personal = PersonalMemory(when_to_use="likes", content="likes tea", target="Bob", reflection_subject="taste")
    assert memory_from_node(personal.to_vector_node()) == personal
    call = ToolCallResult(tool_name="search", input={"q": "x"}, output="ok", token_cost=3)
    tool = ToolMemory(when_to_use="search", tool_call_results=[call])
    back = memory_from_node(tool.to_vector_node())
    assert isinstance(back, ToolMemory)
    assert back.tool_call_results == [call]


def test_inner_metadata_accepted_as_json_string() -> None:
    memory = memory_from_dict({"when_to_use": "w", "content": "c", "metadata": '{"freq": 3}'})
    assert memory.metadata == {"freq": 3}


def test_legacy_rows_with_null_score_and_experience_keys_load() -> None:
    memory = memory_from_dict(
        {
            "workspace_id": "w",
            "experience_id": "abc",
            "experience_type": "task",
            "when_to_use": "w",
            "content": "c",
            "score": None,
            "metadata": {},
        }
    )
    assert memory.memory_id == "abc" and memory.score == 0.0 and memory.memory_type == "task"


def test_unknown_memory_type_is_rejected() -> None:
    with pytest.raises(ValidationError):
        memory_from_dict({"memory_type": "bogus", "when_to_use": "w"})


def test_relevance_is_separate_from_score_and_only_serialised_when_set() -> None:
    memory = TaskMemory(when_to_use="w", content="c", score=0.9)
    assert "relevance" not in memory.model_dump()
    memory.relevance = 0.42
    dumped = memory.model_dump()
    assert dumped["score"] == 0.9 and dumped["relevance"] == 0.42


def test_tool_call_hash_matches_reme_definition() -> None:
    call = ToolCallResult(tool_name="t", input={"b": 1, "a": 2}, output="out")
    expected_input = json.dumps({"a": 2, "b": 1}, sort_keys=True)
    import hashlib

    assert call.compute_hash() == hashlib.md5(f"{expected_input}|out".encode()).hexdigest()


def test_messages_accept_openai_tool_calls_and_blocks() -> None:
    msg = Message.model_validate(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}],
        }
    )
    assert msg.tool_calls[0].name == "f" and json.loads(msg.tool_calls[0].arguments) == {"x": 1}
    blocks = Message.model_validate(
        {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url"}]}
    )
    assert blocks.text == "hi"
    traj = Trajectory.model_validate({"messages": [{"role": "user", "content": "q"}], "score": 1})
    assert traj.score == 1.0


def test_reme_published_library_rows_load() -> None:
    path = shared_file("reme_library/appworld.jsonl")
    rows = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    memories = [memory_from_dict(r) for r in rows]
    assert len(memories) == 193
    assert all(m.memory_type == "task" and m.when_to_use for m in memories)
    first = memories[0]
    assert memory_from_node(first.to_vector_node()).model_dump() == first.model_dump()


def test_trusted_nodes_and_hits_are_what_model_construct_makes() -> None:
    import copy

    import numpy as np

    from reme_service.schema.vector_node import SearchHit, VectorNode, trusted_hit, trusted_node

    vector = np.arange(4, dtype=np.float32)
    metadata = {"content": "do Y", "nested": {"k": [1, 2]}}
    made = trusted_node("id1", "ws", "when X", metadata, vector)
    expected = VectorNode.model_construct(
        unique_id="id1", workspace_id="ws", content="when X", metadata=metadata, vector=vector
    )
    assert made.model_fields_set == expected.model_fields_set == set(VectorNode.model_fields)
    assert made.model_dump(mode="json") == expected.model_dump(mode="json")
    assert made.__pydantic_extra__ is None and made.__pydantic_private__ is None
    hit = trusted_hit(made, 0.25)
    assert hit == SearchHit.model_construct(node=expected, score=0.25)
    assert hit.model_fields_set == {"node", "score"}
    # each object is its own: copies and assignments do not reach another node's fields set
    twin = trusted_node("id2", "ws", "", {}, None)
    twin.content = "changed"
    assert made.content == "when X" and made.model_fields_set == set(VectorNode.model_fields)
    assert copy.deepcopy(made).model_dump(mode="json") == made.model_dump(mode="json")
    assert made.model_copy(update={"vector": None}).vector is None


def test_trusted_search_hit_is_a_trusted_hit_of_a_trusted_node() -> None:
    from reme_service.schema.vector_node import SearchHit, VectorNode, trusted_hit, trusted_node, trusted_search_hit

    metadata = {"content": "do Y", "metadata": {"session": "s1"}}
    made = trusted_search_hit("id1", "ws", "when X", metadata, 0.5)
    expected = trusted_hit(trusted_node("id1", "ws", "when X", metadata, None), 0.5)
    assert (
        made
        == expected
        == SearchHit.model_construct(
            node=VectorNode.model_construct(unique_id="id1", workspace_id="ws", content="when X", metadata=metadata),
            score=0.5,
        )
    )
    assert list(made.node.__dict__) == list(expected.node.__dict__)  # same field order: dumps alike
    assert made.model_fields_set == expected.model_fields_set
    assert made.node.model_fields_set == expected.node.model_fields_set == set(VectorNode.model_fields)
    assert made.node.__pydantic_extra__ is None and made.node.__pydantic_private__ is None
    assert made.__pydantic_extra__ is None and made.__pydantic_private__ is None
    assert made.model_dump(mode="json") == expected.model_dump(mode="json")
