"""The service's log output: `log_format=text` (one readable line) or `json` (one JSON object per line, with the
request fields the access log adds: request_id, method, path, status, duration_ms, flow, workspace)."""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Literal

import orjson

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Fields that a log call may add with `extra=` and that the JSON line carries when present.
REQUEST_FIELDS = ("request_id", "method", "path", "status", "duration_ms", "flow", "workspace")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for field in REQUEST_FIELDS:
            value = getattr(record, field, None)
            if value is not None:
                line[field] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


def configure_logging(level: str, log_format: Literal["text", "json"]) -> None:
    """Set up the root logger on stderr, and route uvicorn's loggers through it (their own access log stays off:
    the service writes its own, `server/observer.py`)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel("DEBUG" if level == "TRACE" else level)  # trace: uvicorn's level, below debug
    for name in ("uvicorn", "uvicorn.error"):
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers[:] = []
        uvicorn_logger.propagate = True
