"""retrieve_personal_memory's rescoring (FuseRerankOp with `rescore.py`): the day a memory was said as its session
(two-stage day → memory ranking), the time bonus of "when" questions, and the period searched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reme_service.config.loader import FLOWS_DIR
from reme_service.ops.personal.fuse_rerank_op import FuseRerankParams, pick
from reme_service.schema.memory import PersonalMemory
from tests.ops.personal_helpers import personal_ops

pytestmark = pytest.mark.anyio

WS = "ws"


def observation(text: str, day: str) -> PersonalMemory:
    said = f"{day} 10:00:00"
    return PersonalMemory(
        content=text,
        when_to_use=text,
        target="Alice",
        time_created=said,
        metadata={"memory_type": "observation", "msg_time": said, "msg_date": day},
    )


def test_the_days_strongest_memory_lifts_its_other_memories() -> None:
    """Two-stage: the day of the best candidate is ranked first, its memories before a slightly more similar one of
    another day (`group_weight` over `msg_date`)."""
    memories = [
        observation("I adopted a kitten.", "2023-05-01"),
        observation("I like painting sunsets.", "2023-06-02"),
        observation("I named it Tilly.", "2023-05-01"),
    ]
    fused = [0.9, 0.5, 0.45]
    params = FuseRerankParams()
    ranked = [i for i, _ in pick("What is my kitten called?", memories, fused, params, params.group_key, 3)]
    assert ranked == [0, 2, 1]
    scores = dict(pick("What is my kitten called?", memories, fused, params, params.group_key, 3))
    assert scores[2] == pytest.approx(0.45 + params.group_weight)  # its day is the best day
    # without the day (insights, memories inserted without `msg_date`) nothing is lifted
    plain = [m.model_copy(update={"metadata": {"memory_type": "observation"}}) for m in memories]
    assert [i for i, _ in pick("What is my kitten called?", plain, fused, params, params.group_key, 3)] == [0, 1, 2]


def test_a_when_question_lifts_memories_that_mention_time() -> None:
    memories = [observation("I ran a marathon.", "2023-05-01"), observation("I ran a marathon last May.", "2023-06-02")]
    params = FuseRerankParams(group_weight=0.0)
    assert [i for i, _ in pick("When did I run a marathon?", memories, [0.6, 0.55], params, None, 2)] == [1, 0]
    assert [i for i, _ in pick("Did I run a marathon?", memories, [0.6, 0.55], params, None, 2)] == [0, 1]


async def insert(app: Any, memories: list[dict[str, Any]]) -> None:
    result = await app.async_execute(name="vector_store", workspace_id=WS, action="insert", memory_dicts=memories)
    assert result["success"], result


def stored(text: str, said: str) -> dict[str, Any]:
    return {
        "memory_type": "personal",
        "when_to_use": text,
        "content": text,
        "target": "Alice",
        "time_created": said,
        "metadata": {"memory_type": "observation", "msg_time": said, "msg_date": said[:10]},
    }


async def test_a_period_named_is_searched_however_many_memories_resemble_the_query_more(tmp_path: Path) -> None:
    """With `period_search`, a question naming a period finds what was said in it although more than
    `time_recall_top_k` other memories resemble the question more: the period is searched (store filter on
    `time_created`), not only a wider search filtered afterwards."""
    flows = yaml.safe_load((FLOWS_DIR / "personal.yaml").read_text(encoding="utf-8"))["flow"]
    flow = dict(flows["retrieve_personal_memory"])
    flow["flow_content"] = flow["flow_content"].replace("FuseRerankOp()", "FuseRerankOp(period_search=True)")
    overlay = tmp_path / "period.yaml"
    overlay.write_text(yaml.safe_dump({"flow": {"retrieve_personal_memory": flow}}), encoding="utf-8")
    async with personal_ops(tmp_path, f"config={overlay}") as app:
        days = [f"2023-{1 + i // 28:02d}-{1 + i % 28:02d} 10:00:00" for i in range(80)]
        await insert(app, [stored(f"I cooked pasta with friends for dinner, number {i}.", day)
                           for i, day in enumerate(days)])  # fmt: skip
        await insert(app, [stored("I cooked risotto with friends.", "2022-03-12 10:00:00")])
        result = await app.async_execute(
            name="retrieve_personal_memory",
            workspace_id=WS,
            query="What did I cook with friends for dinner in March 2022?",
            query_time="2023-06-01",
            user_name="Alice",
            top_k=1,
        )
        assert result["success"], result
        (top,) = result["metadata"]["memory_list"]
        assert top["content"] == "I cooked risotto with friends." and top["time_match"] == "message"
