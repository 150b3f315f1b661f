"""What ``serve`` checks before it writes or starts anything: every room's settings,
and that it can listen where it is told to.

A refusal found later costs more and says less: uvicorn finds a port in use only
once PostgreSQL has started, the store has migrated and the app is built, and
reports it as a log line with the database's exit code. Asked first, each is one
line and nothing has started. The port's check is not a reservation: what takes
the port between it and uvicorn still stops uvicorn.
"""

from __future__ import annotations

import errno
import socket
from typing import TYPE_CHECKING

from palimpsest.api.cli._every_setting import read_every_setting
from palimpsest.api.mcp._settings import McpSettings
from palimpsest.projections.judgment.importance import configured_importance
from palimpsest.projections.recall.settings import EmbeddingSettings
from palimpsest.projections.store.embedded import ServeLock

if TYPE_CHECKING:
    from palimpsest.api._settings import ApiSettings
    from palimpsest.projections.store.settings import DatabaseSettings

__all__ = ["claim_directory_and_port", "port_refusal", "refused_settings"]


def refused_settings(db: DatabaseSettings, api: ApiSettings) -> str | None:
    """Read every room's settings; return why ``serve`` refuses them (None: it does not).

    Raises:
        pydantic.ValidationError: a setting is invalid.
        ConfigurationError: the local embedder is chosen without its extra.
    """
    from palimpsest.api.mcp._http import is_loopback  # the MCP server: only serve needs it

    read_every_setting(db, api)
    # A missing local model is a configuration error, not an outage to retry.
    EmbeddingSettings().make_embedder()
    configured_importance()  # settings valid, but the scorer they make is checked too
    if McpSettings().local_token is not None and not is_loopback(api.host):
        return (
            "PALIMPSEST_MCP_LOCAL_TOKEN serves /mcp without a token, so it is refused "
            f"unless PALIMPSEST_HOST is a loopback address (it is {api.host!r})"
        )
    return None


def claim_directory_and_port(
    db: DatabaseSettings, api: ApiSettings
) -> tuple[ServeLock | None, str | None]:
    """Lock the embedded data directory (None: an external database) and check the
    port; return the lock and why ``serve`` refuses the port (None: it does not;
    otherwise no lock is held).

    Raises:
        DataDirectoryInUseError: another ``serve`` holds the data directory.
    """
    lock = ServeLock(db.data_dir) if db.embedded else None
    # Another serve on an existing directory likely holds the port too: naming its
    # pid is the better answer, so the lock comes first there. A directory not made
    # yet has no other serve, and the port is checked before anything makes it.
    first = lock is not None and db.data_dir.is_dir()
    if lock is not None and first:
        lock.acquire()
    refused = port_refusal(api.host, api.port)
    if refused is not None and lock is not None:
        lock.release()
    elif lock is not None and not first:
        lock.acquire()
    return lock, refused


def port_refusal(host: str, port: int) -> str | None:
    """Return why ``serve`` cannot listen on ``host``:``port`` now (None: it can)."""
    if port == 0:  # any free port, the system's choice
        return None
    # The socket uvicorn binds: IPv6 where the host is an IPv6 address, with
    # SO_REUSEADDR, so a port whose old connections linger in TIME_WAIT counts as free
    # (as it is to uvicorn) and one another socket listens on does not.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return (
                    f"port {port} is in use on {host}: stop what listens there, "
                    "or choose another port (--port, PALIMPSEST_PORT)"
                )
            return f"cannot listen on {host}:{port}: {e.strerror or e}"
    return None
