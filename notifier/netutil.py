"""A free TCP port, for what must be told its port before it listens (a broker's config, an
SMTP controller that probes its own port, a child process given ``--port``)."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on at ``host`` now. The OS picks it; it stays free until someone
    binds it, so use it at once (a listener that can take port 0 should do that instead)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
