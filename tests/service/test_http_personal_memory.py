"""Personal memory over real HTTP: summary, reflection and retrieval, and every bad input of the contract."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from reme_service.testing.openai_server import FakeOpenAI
from tests.service.conftest import ServeFn

pytestmark = pytest.mark.service

SESSION = {
    "time_created": "1:56 pm on 8 May, 2023",
    "messages": [
        {"role": "user", "content": "I went to a LGBTQ support group yesterday.", "metadata": {"dia_id": "D1:3"}},
        {"role": "assistant", "content": "That sounds powerful!"},
        {"role": "user", "content": "I am researching adoption agencies.", "metadata": {"dia_id": "D1:5"}},
    ],
}


def _post(client: httpx.Client, flow: str, **body: Any) -> httpx.Response:
    return client.post(f"/{flow}", json={"workspace_id": "caroline", **body})


def _listed(client: httpx.Client) -> list[dict[str, Any]]:
    return _post(client, "vector_store", action="list").json()["metadata"]["action_result"]


def test_summary_then_time_aware_retrieval(serve: ServeFn) -> None:
    with serve() as client:
        r = _post(client, "summary_personal_memory", user_name="Caroline", trajectories=[SESSION])
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["success"] is True
        assert sorted(body["metadata"]["no_llm_ops"]) == [
            "ContraRepeatOp",
            "GetObservationOp",
            "GetObservationWithTimeOp",
            "InfoFilterOp",
        ]
        assert body["metadata"]["update_result"] == {"deleted_count": 0, "inserted_count": 2}
        assert {m["time_created"] for m in body["metadata"]["memory_list"]} == {"2023-05-08 13:56:00"}
        assert {m["workspace_id"] for m in body["metadata"]["memory_list"]} == {"caroline"}

        r = _post(
            client,
            "retrieve_personal_memory",
            query="What did Caroline do last week?",
            user_name="Caroline",
            query_time="2023-05-12T09:00:00",
            top_k=1,
        )
        body = r.json()
        assert r.status_code == 200 and body["success"] is True
        assert body["answer"] == (
            "[2023-05-08 13:56:00 Monday] I went to a LGBTQ support group yesterday. (time: 2023-05-07)"
        )
        (memory,) = body["metadata"]["memory_list"]
        assert memory["time_match"] == "event"
        assert memory["metadata"]["source_metadata"] == {"dia_id": "D1:3"}
        assert body["metadata"]["time_extraction"]["label"] == "2023-05-01..2023-05-07"

        # a long query (past INLINE_TIME_TEXT: its period is read in the regex lane) still names its period
        long = _post(
            client,
            "retrieve_personal_memory",
            query="What did Caroline do last week? " + "Tell me everything you remember about it. " * 100,
            user_name="Caroline",
            query_time="2023-05-12T09:00:00",
            top_k=1,
        )
        assert long.status_code == 200
        assert long.json()["metadata"]["time_extraction"]["label"] == "2023-05-01..2023-05-07"

        other = _post(client, "retrieve_personal_memory", query="support group", user_name="Melanie")
        assert other.json() == {
            "answer": "",
            "success": True,
            "metadata": {
                "query_time": other.json()["metadata"]["query_time"],
                "time_extraction": None,
                "memory_list": [],
            },
        }


def test_reflection_over_http(serve: ServeFn) -> None:
    painted = [
        f"I painted a {what} with my kids." for what in ("sunset", "lake", "forest", "mountain", "river", "beach")
    ]
    ran = [f"I ran a marathon in {city}." for city in ("Boston", "Chicago", "Berlin", "Tokyo", "London")]
    messages = [
        {"role": "user", "content": text, "time_created": f"2023-06-{day:02d}"}
        for day, text in enumerate(painted + ran, 1)
    ]
    with serve() as client:
        assert _post(client, "summary_personal_memory", user_name="Melanie", messages=messages).status_code == 200
        r = _post(client, "reflect_personal_memory", user_name="Melanie")
        body = r.json()
        assert r.status_code == 200 and body["success"] is True
        assert body["metadata"]["reflection"]["reflected_observations"] == 11
        insights = {m["reflection_subject"]: m["content"] for m in body["metadata"]["memory_list"]}
        assert set(insights) == {"painted", "marathon"}
        assert insights["marathon"] == (
            "I ran a marathon in London. / I ran a marathon in Tokyo. / I ran a marathon in Berlin."
        )
        r = _post(client, "reflect_personal_memory", user_name="Melanie")
        assert r.json()["answer"] == "not enough new observations to reflect on (0 < 10)"


@pytest.mark.parametrize(
    ("flow", "body", "loc"),
    [
        (
            "summary_personal_memory",
            {"messages": [{"role": "user", "content": "hi", "time_created": "the other day"}]},
            ["body", "messages", 0, "time_created"],
        ),
        (
            "summary_personal_memory",
            {"trajectories": [{"messages": [SESSION["messages"][0], {"content": "x", "time_created": "2023-02-30"}]}]},
            ["body", "trajectories", 0, "messages", 1, "time_created"],
        ),
        (
            "summary_personal_memory",
            {"trajectories": [{"time_created": "whenever", "messages": SESSION["messages"]}]},
            ["body", "trajectories", 0, "time_created"],
        ),
        (
            "summary_personal_memory",
            {"trajectories": [{"timestamp": "yesterday", "messages": SESSION["messages"]}]},
            ["body", "trajectories", 0, "timestamp"],
        ),
        ("summary_personal_memory", {"messages": SESSION["messages"], "language": "fr"}, ["body", "language"]),
        ("retrieve_personal_memory", {"query": "q", "query_time": "next-ish week"}, ["body", "query_time"]),
        ("retrieve_personal_memory", {"query": "q", "query_time": True}, ["body", "query_time"]),
        ("retrieve_personal_memory", {"query": "q", "top_k": 0}, ["body", "top_k"]),
        (
            "retrieve_personal_memory",
            {"messages": [{"role": "user", "content": "q", "time_created": "13:56"}]},
            ["body", "messages", 0, "time_created"],
        ),
    ],
)
def test_bad_input_is_422_naming_the_field(serve: ServeFn, flow: str, body: dict[str, Any], loc: list[Any]) -> None:
    with serve() as client:
        r = _post(client, flow, **body)
        assert r.status_code == 422, r.text
        assert r.json()["detail"][0]["loc"] == loc
        assert _listed(client) == []


def test_unreadable_time_says_what_is_accepted(serve: ServeFn) -> None:
    with serve() as client:
        r = _post(client, "summary_personal_memory", messages=[{"content": "hi", "time_created": "the other day"}])
        message = r.json()["detail"][0]["msg"]
        assert "cannot read 'the other day'" in message and "2023-05-08 13:56:00" in message


def test_nothing_to_summarise_is_400_and_an_empty_query_an_empty_answer(serve: ServeFn) -> None:
    with serve() as client:
        r = _post(client, "summary_personal_memory", trajectories=[])
        assert r.status_code == 400 and "nothing to summarise" in r.json()["metadata"]["error"]["message"]
        r = _post(client, "retrieve_personal_memory", query="")
        assert r.status_code == 200 and r.json()["metadata"]["memory_list"] == []
        assert "query was empty" in r.json()["metadata"]["warning"]


def test_malformed_llm_replies_are_502_and_nothing_is_stored(serve: ServeFn, fake_openai: FakeOpenAI) -> None:
    fake, url = fake_openai, fake_openai.base_url
    fake.on_op("InfoFilterOp", "Result: 1 | 3\nResult: 2 | 3")
    fake.on_op("GetObservationWithTimeOp", "Information: 1 | 2023-05-07 | went | group")
    fake.on_op("GetObservationOp", "Caroline is researching adoption agencies.")
    with serve("llm.default.max_retries=0", env={"FLOW_LLM_BASE_URL": url}) as client:
        r = _post(client, "summary_personal_memory", user_name="Caroline", trajectories=[SESSION])
        assert r.status_code == 502
        body = r.json()
        assert body["success"] is False and body["answer"] == ""
        assert body["metadata"]["error"]["code"] == "llm_error"
        assert "GetObservationOp" in body["metadata"]["error"]["message"]
        assert _listed(client) == []


def test_openapi_declares_the_personal_fields(serve: ServeFn) -> None:
    with serve() as client:
        schemas = client.get("/openapi.json").json()["components"]["schemas"]
        summary = schemas["SummaryPersonalMemoryRequest"]["properties"]
        assert {"trajectories", "messages", "user_name", "language"} <= set(summary)
        retrieve = schemas["RetrievePersonalMemoryRequest"]["properties"]
        assert {"query", "messages", "top_k", "user_name", "query_time"} <= set(retrieve)
        assert "PersonalMessage" in schemas and "PersonalTrajectory" in schemas


def test_a_time_query_embeds_the_query_once(serve: ServeFn, fake_openai: FakeOpenAI) -> None:
    fake, url = fake_openai, fake_openai.base_url
    overrides = (
        "embedding_model.default.backend=openai_compatible",
        f"embedding_model.default.base_url={url}",
        "embedding_model.default.params.dimensions=64",
    )
    with serve(*overrides) as client:
        assert _post(client, "summary_personal_memory", user_name="Caroline", trajectories=[SESSION]).status_code == 200
        before = len(fake.requests_to("embeddings"))
        r = _post(client, "retrieve_personal_memory", query="What did I do last week?", query_time="2023-05-12")
        assert r.json()["metadata"]["time_extraction"]["label"] == "2023-05-01..2023-05-07"
        assert len(fake.requests_to("embeddings")) == before + 1
