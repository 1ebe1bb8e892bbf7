"""The audit log: one JSON line per request that changes memories or files, on disk before the answer."""
