"""service"""

from notifier.service.coordinator import Coordinator, LogSink, make_collector

__all__ = [
    "Coordinator",
    "LogSink",
    "make_collector",
]
