"""api"""

from notifier.api.app import ApiServer, create_app

__all__ = [
    "ApiServer",
    "create_app",
]
