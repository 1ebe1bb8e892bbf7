"""The service's exception tree, with stable codes and HTTP statuses.

```
ReMeError                      code "internal_error", 500
├── ConfigError                code "config_error" (start-up only; the service refuses to start)
│   ├── FlowSyntaxError        code "flow_syntax_error"
│   └── FlowDeclarationError   code "flow_declaration_error"
├── InvalidRequestError        code "invalid_request", 400
├── PathNotAllowedError        code "path_not_allowed", 403
├── NotFoundError              code "not_found", 404
├── ProviderError              code "provider_error", 502
│   ├── LLMError               code "llm_error"
│   └── EmbeddingError         code "embedding_error"
├── StoreError                 code "store_unavailable", 503
│   └── DimensionMismatchError code "dimension_mismatch", 400
└── OpError                    wraps a failure inside a flow; code and status come from its cause
```

`server/http.py` is the one place that turns these into HTTP responses.
"""

from __future__ import annotations

from typing import Any


class ReMeError(Exception):
    """Base of every error the service raises on purpose."""

    code: str = "internal_error"
    status: int = 500

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            body["details"] = self.details
        return body


class ConfigError(ReMeError):
    """The configuration is invalid; raised while the app starts."""

    code = "config_error"


class FlowSyntaxError(ConfigError):
    """A flow expression does not parse or names an unknown op."""

    code = "flow_syntax_error"


class FlowDeclarationError(ConfigError):
    """A flow does not give an op what it declares it reads (a request field or a context key)."""

    code = "flow_declaration_error"


class InvalidRequestError(ReMeError):
    """A request value is well-typed but not acceptable (unknown action, empty query, bad workspace id)."""

    code = "invalid_request"
    status = 400


class PathNotAllowedError(ReMeError):
    """A file path resolves outside the configured roots."""

    code = "path_not_allowed"
    status = 403


class NotFoundError(ReMeError):
    """A named thing (flow, file) does not exist."""

    code = "not_found"
    status = 404


class ProviderError(ReMeError):
    """An LLM or embedding provider failed after its retries."""

    code = "provider_error"
    status = 502


class LLMError(ProviderError):
    code = "llm_error"


class EmbeddingError(ProviderError):
    code = "embedding_error"


class StoreError(ReMeError):
    """The vector store is unreachable or failed."""

    code = "store_unavailable"
    status = 503


class DimensionMismatchError(StoreError):
    """A vector's dimension differs from the workspace's."""

    code = "dimension_mismatch"
    status = 400


class OpError(ReMeError):
    """A failure inside a flow, naming the flow and the op; status and code follow the cause."""

    def __init__(self, flow: str, op: str, cause: BaseException) -> None:
        inner = cause.message if isinstance(cause, ReMeError) else f"{type(cause).__name__}: {cause}"
        super().__init__(f"flow '{flow}', op '{op}': {inner}")
        self.flow = flow
        self.op = op
        self.__cause__ = cause
        if isinstance(cause, ReMeError):
            self.code = cause.code
            self.status = cause.status
            self.details = dict(cause.details)
        self.details.update({"flow": flow, "op": op})
