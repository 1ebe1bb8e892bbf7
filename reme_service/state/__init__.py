"""Shared state beside the vector store: keys, audit, history, jobs, events, rate limits, working-memory files."""
