"""The history of every memory: an append-only list of ADD, UPDATE, DELETE and INVALIDATE entries (docs/history.md)."""
