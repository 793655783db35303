"""``notifier`` as a client of a running service, as amtool is for Alertmanager, and the
test of a config's receivers.

- ``api``: where the service is (``--url``, the config's ``api:`` section, the default), the
  bearer token (``$NOTIFIER_API_TOKEN``), the HTTP calls (httpx) and errors a person can act
  on, with the exit codes
- ``tables``: the tables and times people read
- ``commands``: ``status``, ``incidents``, ``silence add|list|expire`` and ``notify test``,
  added to the ``notifier`` command by :func:`register`

The commands only read and write through the service's API (``/api/groups``,
``/api/incidents``, ``/api/silences``); ``notify test`` sends through
:mod:`notifier.notify.trial`. May import :mod:`notifier.config`, :mod:`notifier.notify` and
:mod:`notifier.types`.
"""

from notifier.client.api import (
    EXIT_CANNOT_ASK,
    EXIT_FAILED,
    EXIT_OK,
    TOKEN_VARIABLE,
    ClientError,
    ServiceClient,
    Target,
    find_target,
)
from notifier.client.commands import register

__all__ = [
    "EXIT_CANNOT_ASK",
    "EXIT_FAILED",
    "EXIT_OK",
    "TOKEN_VARIABLE",
    "ClientError",
    "ServiceClient",
    "Target",
    "find_target",
    "register",
]
