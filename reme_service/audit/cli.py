"""`reme audit --workspace W [--since T] [--until T] [--json]`: print the audit records of the configured data.

Takes the same `config=` and `key=value` arguments as `reme` to find the audit trail: the audit directory, or the
PostgreSQL state every node shares (`state.backend`). Times are ISO 8601
dates or date-times (UTC when no offset is given).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime

from reme_service.audit.record import AuditRecord
from reme_service.config.loader import load_config
from reme_service.errors import ReMeError
from reme_service.state.admin import audit_records

USAGE = """usage: reme audit [--workspace W] [--since T] [--until T] [--json] [config args]

Prints who changed what: one line per request that changed memories or files (or tried to). T is an ISO date or
date-time, e.g. 2026-11-23 or 2026-11-23T10:00 (UTC unless it has an offset). --json prints the records as JSON
lines. Config args are those of `reme` (config=FILE, data_dir=DIR, audit.dir=DIR).
"""


def _moment(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"not an ISO date or date-time: {text!r} (e.g. 2026-11-23 or 2026-11-23T10:00)") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _line(record: AuditRecord) -> str:
    who = f"{record.key_id} ({record.key_name})" if record.key_id else "trusted"
    counts = " ".join(f"{name}={count}" for name, count in record.counts.items() if count)
    outcome = record.status if record.error_code is None else f"error:{record.error_code}"
    return (
        f"{record.time.strftime('%Y-%m-%d %H:%M:%S')}  {record.workspace_id:20}  {record.flow}/{record.action:14}  "
        f"{outcome:24}  {who:28}  {counts or '-'}  {record.request_id}"
    )


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    if any(a in ("-h", "--help", "help") for a in args):
        sys.stdout.write(USAGE)
        return 0
    config_args = [a for a in args if "=" in a and not a.startswith("-")]
    parser = argparse.ArgumentParser(prog="reme audit", usage=USAGE, add_help=False)
    parser.add_argument("--workspace")
    parser.add_argument("--since")
    parser.add_argument("--until")
    parser.add_argument("--json", action="store_true")
    try:
        parsed = parser.parse_args([a for a in args if a not in config_args])
    except SystemExit:
        return 2
    try:
        since = _moment(parsed.since) if parsed.since else None
        until = _moment(parsed.until) if parsed.until else None
        config = load_config(config_args)
    except ValueError as exc:
        sys.stderr.write(f"reme audit: {exc}\n")
        return 2
    except ReMeError as exc:
        sys.stderr.write(f"reme audit: {exc.message}\n")
        return 2
    try:
        for record in audit_records(config, workspace=parsed.workspace, since=since, until=until):
            sys.stdout.write((record.model_dump_json() if parsed.json else _line(record)) + "\n")
    except ReMeError as exc:  # the PostgreSQL state cannot be reached
        sys.stderr.write(f"reme audit: {exc.message}\n")
        return 1
    return 0
