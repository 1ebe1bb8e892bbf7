"""Test kit for reme_service and for code written against it (a store, a client, an op).

- `openai_server`: an OpenAI-compatible chat/embeddings server (`FakeOpenAI`) to run on loopback;
- `serve`: `serve_in_thread`, any ASGI app on a free loopback port for the length of a `with` block;
- `scripted_llm`: `ScriptedLLM`, an in-process `LLMClient` whose replies are scripted per op;
- `run_op`: one op (or a small op tree) on a real `ServiceContext`, without the app or an HTTP server;
- `ports`, `percentiles`: a free TCP port; the percentile of latency samples;
- `ready`, `haproxy`: wait until a started process answers a health URL; Debian's haproxy in front of nodes;
- `pytest_plugin`: the fixtures (`fake_openai`, ...); `pytest_plugins = ["reme_service.testing.pytest_plugin"]`;
- `contract`: the store contract a `VectorStore` implementation must pass.

Nothing here imports pytest except `pytest_plugin` (and `contract`, which is a pytest suite).
"""
