"""A free TCP port on loopback, for a server a test or a bench starts in another process."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port nothing listens on right now, chosen by the OS.

    The port is released before it is returned, so another process may take it first: start the server that
    uses it at once, and pass port 0 instead wherever the server can report the port it bound.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
