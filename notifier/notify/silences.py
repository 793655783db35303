"""Silences: matchers and a time window that hold matching alerts back.

A silence comes from the config file (:func:`config_silence`, its id a hash of its content, so
it is the same after a restart) or from the API (:func:`make_silence`, which validates the
request and names every bad field in a :class:`SilenceError`).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pydantic import ValidationError

from notifier.config import (
    MAX_SILENCE_MATCHERS,
    ConfigError,
    Matcher,
    SilenceConfig,
    SilenceLimits,
    format_duration,
    parse_matchers,
)
from notifier.notify.matchers import matches_incident
from notifier.types import Incident


@dataclass(slots=True)
class Silence:
    """Alerts matching every matcher are held back while ``starts_at <= now < ends_at``.

    A silenced incident is still tracked (and shown as silenced); when the silence ends while
    it still fires, it is notified. ``source``: ``config`` or ``api``.
    """

    id: str
    matchers: tuple[Matcher, ...]
    starts_at: int
    ends_at: int
    author: str
    comment: str
    created_at: int
    source: str = "api"

    def active(self, now: int) -> bool:
        return self.starts_at <= now < self.ends_at

    def state(self, now: int) -> str:
        if now < self.starts_at:
            return "pending"
        return "active" if now < self.ends_at else "expired"

    def matches(self, incident: Incident) -> bool:
        return matches_incident(self.matchers, incident)

    def to_dict(self, now: int | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "matchers": [str(m) for m in self.matchers],
            "starts_at": self.starts_at,
            "ends_at": self.ends_at,
            "author": self.author,
            "comment": self.comment,
            "created_at": self.created_at,
            "source": self.source,
        }
        if now is not None:
            data["state"] = self.state(now)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Silence:
        matchers = tuple(Matcher.model_validate(m) for m in parse_matchers(data["matchers"]))
        return cls(
            id=data["id"],
            matchers=matchers,
            starts_at=data["starts_at"],
            ends_at=data["ends_at"],
            author=data["author"],
            comment=data["comment"],
            created_at=data["created_at"],
            source=data.get("source", "api"),
        )


class SilenceError(ConfigError):
    """A silence request is invalid; ``problems`` are ``(field, message)`` pairs."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__("silence", problems)


class SilenceLimitError(SilenceError):
    """A valid silence the service holds too many of already (``max_silences``)."""


def stored_size(silence: Silence) -> int:
    """The bytes a silence takes as stored (its JSON)."""
    return len(json.dumps(silence.to_dict(), separators=(",", ":")).encode())


def make_silence(
    matchers: Any,
    *,
    ends_at: int,
    starts_at: int | None = None,
    author: str,
    comment: str,
    now: int,
    silence_id: str | None = None,
    source: str = "api",
    limits: SilenceLimits | None = None,
) -> Silence:
    """Validate a silence request (the API's POST body); raises :class:`SilenceError`.
    ``limits``: how far ahead it may end and how large it may be (``notify.silence_limits``)."""
    problems: list[tuple[str, str]] = []
    parsed: list[Matcher] = []
    try:
        items = parse_matchers(matchers)
    except ValueError as exc:
        items = []
        problems.append(("matchers", str(exc)))
    for index, item in enumerate(items):
        try:
            parsed.append(Matcher.model_validate(item))
        except ValueError as exc:
            message = str(exc)
            if isinstance(exc, ValidationError):
                message = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
            problems.append((f"matchers[{index}]", message))
    if not items and not problems:
        problems.append(("matchers", "at least one matcher is required"))
    elif len(items) > MAX_SILENCE_MATCHERS:
        problems.append(("matchers", f"at most {MAX_SILENCE_MATCHERS} matchers, got {len(items)}"))
    start = now if starts_at is None else int(starts_at)
    if int(ends_at) <= start:
        problems.append(("ends_at", "must be after starts_at"))
    elif int(ends_at) <= now:
        problems.append(("ends_at", "is in the past: the silence would never be active"))
    elif limits is not None and int(ends_at) - now > limits.max_silence_ends_in * 1000:
        ahead = format_duration(limits.max_silence_ends_in)
        problems.append(("ends_at", f"is more than {ahead} ahead "
                                    "(notify.silence_limits.max_silence_ends_in)"))  # fmt: skip
    if not str(author or "").strip():
        problems.append(("author", "is required"))
    if not str(comment or "").strip():
        problems.append(("comment", "is required"))
    if problems:
        raise SilenceError(problems)
    silence = Silence(
        id=silence_id or uuid.uuid4().hex,
        matchers=tuple(parsed),
        starts_at=start,
        ends_at=int(ends_at),
        author=str(author).strip(),
        comment=str(comment).strip(),
        created_at=now,
        source=source,
    )
    if limits is not None and (size := stored_size(silence)) > limits.max_silence_size_bytes:
        raise SilenceError([(
            "silence",
            f"takes {size} bytes (matchers, author and comment), more than "
            f"{limits.max_silence_size_bytes} (notify.silence_limits.max_silence_size_bytes)",
        )])  # fmt: skip
    return silence


class _Placed(Protocol):
    """What a silence's place in the listing order is made of."""

    @property
    def starts_at(self) -> int: ...

    @property
    def id(self) -> str: ...


PlacedT = TypeVar("PlacedT", bound=_Placed)


def silences_page(
    silences: Sequence[PlacedT], limit: int, after: str | None = None
) -> tuple[list[PlacedT], str | None]:
    """One page of ``silences`` (ordered by start, then id, as the notifier lists them): the
    first ``limit`` after the cursor ``after``, and the cursor of the next page (None: this is
    the last). A cursor stays valid while silences are added or expired meanwhile: it names a
    place in the order, not an index. Raises ValueError for a cursor that is not one."""
    start = 0
    if after is not None:
        starts_at, _, silence_id = after.partition("-")
        if not (starts_at.isdigit() and silence_id):
            raise ValueError(f"not a cursor from a previous page: {after!r}")
        key = (int(starts_at), silence_id)
        start = bisect.bisect_right([(s.starts_at, s.id) for s in silences], key)
    page = list(silences[start : start + limit])
    more = start + limit < len(silences)
    return page, (f"{page[-1].starts_at}-{page[-1].id}" if more and page else None)


def config_silence(config: SilenceConfig) -> Silence:
    """A silence from the config file; its id is a hash of its content, so a restart (or a
    reload of the same file) finds the same silence."""
    starts, ends = config.starts_at_ms, config.ends_at_ms
    digest = hashlib.sha256(
        f"{[str(m) for m in config.matchers]}|{starts}|{ends}|{config.author}".encode()
    ).hexdigest()[:16]
    return Silence(
        id=f"config-{digest}",
        matchers=tuple(config.matchers),
        starts_at=starts,
        ends_at=ends,
        author=config.author,
        comment=config.comment,
        created_at=starts,
        source="config",
    )
