"""LangGraph integration (the `langgraph` extra): `ReMeStore`, a `langgraph.store.base.BaseStore` over the
service's HTTP API (`store.py`); namespaces become workspaces as `namespaces.py` says."""

from reme_service.integrations.langgraph.store import ReMeStore

__all__ = ["ReMeStore"]
