"""The route tree: which receiver hears about an incident, and how its alerts are grouped.

:meth:`Route.build` resolves the configured tree once, each child inheriting what it leaves
unset (times become milliseconds); :meth:`Route.match` walks it the Alertmanager way (the first
matching child wins unless it says ``continue``), and :meth:`Route.group_key` names the
aggregation group an incident falls into.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from notifier.config import Matcher, RouteConfig
from notifier.notify.matchers import matches_incident
from notifier.types import Incident, Severity


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


@dataclass(slots=True, eq=False)
class Route:
    """A route with its parameters resolved (inherited); times in milliseconds."""

    id: str
    receiver: str
    matchers: tuple[Matcher, ...]
    continue_: bool
    threshold: Severity
    send_resolved: bool
    repeat_interval: float
    group_by: tuple[str, ...] | None
    group_wait: int
    group_interval: int
    children: list[Route] = field(default_factory=list)
    path_matchers: tuple[Matcher, ...] = ()
    """This route's matchers and its ancestors': what an incident matched to get here."""

    @classmethod
    def build(cls, config: RouteConfig, parent: Route | None = None, path: str = "root") -> Route:
        """Resolve ``config`` under ``parent``: unset parameters are inherited (the root's
        defaults: threshold warn, send_resolved, repeat 4h, group_by [cluster] — so a storm
        of groups failing at once is one message per receiver, as the issue asks —,
        group_wait 30s, group_interval 5m)."""
        repeat: float  # milliseconds, or math.inf: never repeat
        if parent is None:
            receiver = config.receiver or ""
            threshold, send_resolved, repeat = Severity.WARN, True, _ms(4 * 3600)
            group_by: tuple[str, ...] | None = ("cluster",)
            group_wait, group_interval = _ms(30), _ms(300)
        else:
            receiver, threshold = parent.receiver, parent.threshold
            send_resolved, repeat = parent.send_resolved, parent.repeat_interval
            group_by, group_wait = parent.group_by, parent.group_wait
            group_interval = parent.group_interval
        if config.group_by is not None:
            group_by = None if config.group_by == ("...",) else config.group_by
        route = cls(
            id=config.name or path,
            receiver=config.receiver or receiver,
            matchers=tuple(config.matchers),
            continue_=config.continue_,
            threshold=config.threshold or threshold,
            send_resolved=send_resolved if config.send_resolved is None else config.send_resolved,
            repeat_interval=repeat
            if config.repeat_interval is None
            else (math.inf if config.repeat_interval == math.inf else _ms(config.repeat_interval)),
            group_by=group_by,
            group_wait=group_wait if config.group_wait is None else _ms(config.group_wait),
            group_interval=group_interval
            if config.group_interval is None
            else _ms(config.group_interval),
            path_matchers=(parent.path_matchers if parent else ()) + tuple(config.matchers),
        )
        route.children = [
            cls.build(child, route, f"{path}.{index}") for index, child in enumerate(config.routes)
        ]
        return route

    def walk(self) -> Iterable[Route]:
        yield self
        for child in self.children:
            yield from child.walk()

    def match(self, incident: Incident) -> list[Route]:
        """The routes that handle ``incident`` below (and including) this matched node."""
        found: list[Route] = []
        for child in self.children:
            if matches_incident(child.matchers, incident):
                found.extend(child.match(incident))
                if not child.continue_:
                    break
        return found or [self]

    def group_key(self, incident: Incident, *, lane: bool = False) -> str:
        """``{cluster="prod",group="orders"}``: the aggregation group within this route
        (``lane``: without ``status``, which changes during an incident's life)."""
        labels = ("cluster", "group") if self.group_by is None else self.group_by
        if lane:
            labels = tuple(label for label in labels if label != "status")
        values = {"cluster": incident.cluster, "group": incident.group, "status": incident.status}
        return "{" + ",".join(f"{label}={json.dumps(str(values[label]))}" for label in labels) + "}"
