"""The layer put around every vector-store backend: `GuardedStore` (audit and history, size bounds, metering), the
`Writer` a request's writes are recorded for, and the factory that builds a backend and wraps it. It sits above
`stores/`, which knows nothing of audit, history or metrics."""
