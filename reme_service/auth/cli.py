"""`reme keys create|list|revoke`: manage the API keys of the configuration given.

Takes the same `config=FILE` and `key=value` arguments as `reme` (e.g. `data_dir=...`, `auth.keys_file=...`) to find
the keys: the key file, or the PostgreSQL state every node shares (`state.backend`, `state/admin.py`).
`create` prints the new key as the last line of stdout, once; nothing stores it in clear.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import datetime

from reme_service.config.loader import load_config
from reme_service.errors import ReMeError
from reme_service.schema.workspace_ids import validate_workspace_id
from reme_service.state.admin import KeyAdmin, key_admin

USAGE = """usage: reme keys create --workspace W [--workspace W2 ...] --scope read|write|admin [--name N] [config args]
       reme keys list [config args]
       reme keys revoke ID [config args]

Config args are those of `reme` (config=FILE, data_dir=DIR, auth.keys_file=FILE, ...): they say which key file.
--workspace '*' (every workspace) only with --scope admin. The new key is printed once, as the last line.
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="reme keys", usage=USAGE, add_help=False)
    parser.add_argument("command", choices=["create", "list", "revoke"])
    parser.add_argument("key_id", nargs="?")
    parser.add_argument("--workspace", action="append", default=[])
    parser.add_argument("--scope", choices=["read", "write", "admin"])
    parser.add_argument("--name", default="")
    return parser


#: the options that take a value: the argument after one is its value, even when it holds "=" (`--workspace a=b`)
_VALUED = ("--workspace", "--scope", "--name")


def _split(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """(config args, the options and their values): `NAME=VALUE` is a config arg unless it is an option's value."""
    config_args: list[str] = []
    options: list[str] = []
    value_next = False
    for arg in args:
        if value_next or "=" not in arg or arg.startswith("-"):
            options.append(arg)
            value_next = not value_next and arg in _VALUED
        else:
            config_args.append(arg)
    return config_args, options


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    if not args or any(a in ("-h", "--help", "help") for a in args):
        sys.stdout.write(USAGE)
        return 0 if args else 2
    config_args, options = _split(args)
    try:
        parsed = _parser().parse_args(options)
    except SystemExit:
        return 2
    try:
        admin = key_admin(load_config(config_args))
        try:
            if parsed.command == "create":
                return _create(admin, parsed)
            if parsed.command == "list":
                return _list(admin)
            return _revoke(admin, parsed.key_id)
        finally:
            admin.close()
    except ReMeError as exc:  # ConfigError, or a workspace id the service would refuse
        sys.stderr.write(f"reme keys: {exc.message}\n")
        return 2
    except (ValueError, OSError) as exc:
        sys.stderr.write(f"reme keys: {exc}\n")
        return 2


def _create(admin: KeyAdmin, parsed: argparse.Namespace) -> int:
    if parsed.scope is None or not parsed.workspace:
        sys.stderr.write("reme keys: create needs --scope read|write|admin and at least one --workspace\n")
        return 2
    workspaces = [w if w == "*" else validate_workspace_id(w) for w in parsed.workspace]
    record, key = admin.create(workspaces=workspaces, scope=parsed.scope, name=parsed.name)
    sys.stderr.write(
        f"created key {record.id} ({record.scope}) for {', '.join(record.workspaces)} in {admin.where}; "
        "it is shown once, below: keep it now\n"
    )
    sys.stdout.write(key + "\n")
    return 0


def _list(admin: KeyAdmin) -> int:
    header = f"{'id':12}  {'name':16}  {'scope':5}  {'state':7}  {'created':19}  {'last used':19}  workspaces"
    sys.stdout.write(header + "\n")
    for record, last_used in admin.list():
        state = "active" if record.active else "revoked"
        sys.stdout.write(
            f"{record.id:12}  {record.name[:16]:16}  {record.scope:5}  {state:7}  {_when(record.created):19}  "
            f"{_when(last_used):19}  {','.join(record.workspaces)}\n"
        )
    return 0


def _revoke(admin: KeyAdmin, key_id: str | None) -> int:
    if not key_id:
        sys.stderr.write("reme keys: revoke needs the key's ID (see `reme keys list`)\n")
        return 2
    try:
        record = admin.revoke(key_id)
    except KeyError:
        sys.stderr.write(f"reme keys: no key with id {key_id!r} in {admin.where}\n")
        return 2
    sys.stdout.write(f"revoked {record.id} ({record.name or 'no name'}) at {_when(record.revoked)}\n")
    return 0
