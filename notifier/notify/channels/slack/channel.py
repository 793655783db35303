"""Slack: the incoming webhook and the bot that follows up on an incident's first message.

:class:`SlackWebhook` posts one message per notification; :class:`SlackBot` posts with a bot
token and can update, or reply in the thread of, the message an incident was first posted in.
Both render ``slack/<event>.json.j2`` and pass the result through :func:`fit_slack_message`, so
Slack's block and text limits hold whatever a template produced.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, cast

import httpx

from notifier.config import Rate, Secret
from notifier.notify.channels.base import (
    ChannelPolicy,
    HttpChannel,
    MessageLookup,
    MessageRef,
    no_alerts,
    policy_key,
)
from notifier.notify.channels.delivery import Delivery, classify_http, combine, parse_retry_after
from notifier.notify.channels.format import clip, clip_lines, status_color
from notifier.notify.channels.templates import TemplateError, Templates, render_or_fall_back
from notifier.types import Alert, Event, Incident, Notification

TEMPLATE_FOLDER = "slack"
"""Both Slack channels render ``slack/<event>.json.j2``."""

SLACK_MAX_BLOCKS = 50
SLACK_MAX_SECTION_TEXT = 3000
SLACK_MAX_HEADER_TEXT = 150
SLACK_MAX_FIELD_TEXT = 2000
SLACK_MAX_FIELDS = 10
SLACK_MAX_CONTEXT_ELEMENTS = 10
SLACK_MAX_TEXT = 3000
"""The fallback ``text`` is what phones show in a push notification; keep it readable."""


def check_slack_shape(name: str, body: Any) -> None:
    """A rendered Slack template must be a message Slack accepts: an object with text or
    blocks (what ``notifier check`` holds every ``slack/*.json.j2`` to)."""
    if not isinstance(body, dict) or not (body.get("text") or body.get("blocks")):
        raise TemplateError(name, "a Slack message must be a JSON object with text or blocks")


def _fit_block(block: dict[str, Any]) -> dict[str, Any]:
    kind = block.get("type")
    text = block.get("text")
    if kind == "header" and isinstance(text, dict) and isinstance(text.get("text"), str):
        text["text"] = clip(text["text"], SLACK_MAX_HEADER_TEXT)
    elif kind == "section":
        if isinstance(text, dict) and isinstance(text.get("text"), str):
            text["text"] = clip_lines(text["text"], SLACK_MAX_SECTION_TEXT)
        fields = block.get("fields")
        if isinstance(fields, list):
            del fields[SLACK_MAX_FIELDS:]
            for item in fields:
                if isinstance(item, dict) and isinstance(item.get("text"), str):
                    item["text"] = clip_lines(item["text"], SLACK_MAX_FIELD_TEXT)
    elif kind == "context":
        elements = block.get("elements")
        if isinstance(elements, list):
            del elements[SLACK_MAX_CONTEXT_ELEMENTS:]
            for item in elements:
                if isinstance(item, dict) and isinstance(item.get("text"), str):
                    item["text"] = clip_lines(item["text"], SLACK_MAX_SECTION_TEXT)
    return block


def _more_attachment(count: int) -> dict[str, Any]:
    return {
        "color": status_color("NOTFOUND"),
        "fallback": f"… and {count} more",
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": f"… and {count} more"}}],
    }


def fit_slack_message(message: dict[str, Any]) -> dict[str, Any]:
    """Enforce Slack's limits on a rendered message, whatever the template produced.

    Section texts are cut to 3000 characters at a line boundary (``… and N more``), header
    texts to 150; top-level blocks plus the blocks of all attachments to 50 in total — the
    trailing attachments (one per alert in the built-in templates) go first and are replaced
    by a single ``… and N more`` attachment.
    """
    if isinstance(message.get("text"), str):
        message["text"] = clip_lines(message["text"], SLACK_MAX_TEXT)
    blocks = message.get("blocks")
    if not isinstance(blocks, list):
        blocks = []
    attachments = message.get("attachments")
    if not isinstance(attachments, list):
        attachments = []
    for block in blocks:
        if isinstance(block, dict):
            _fit_block(block)
    for attachment in attachments:
        if isinstance(attachment, dict) and isinstance(attachment.get("blocks"), list):
            for block in attachment["blocks"]:
                if isinstance(block, dict):
                    _fit_block(block)

    def attachment_blocks(item: Any) -> int:
        inner = item.get("blocks") if isinstance(item, dict) else None
        return len(inner) if isinstance(inner, list) else 0

    total = len(blocks) + sum(attachment_blocks(a) for a in attachments)
    if total <= SLACK_MAX_BLOCKS:
        return message
    dropped = 0
    # Make room for the "… and N more" attachment's one block.
    while attachments and total > SLACK_MAX_BLOCKS - 1:
        total -= attachment_blocks(attachments.pop())
        dropped += 1
    if total > SLACK_MAX_BLOCKS - 1:  # the top-level blocks alone are too many
        cut = total - (SLACK_MAX_BLOCKS - 1)
        del blocks[len(blocks) - cut :]
        dropped += cut
    attachments.append(_more_attachment(dropped))
    message["blocks"] = blocks
    message["attachments"] = attachments
    return message


class _SlackRendering:
    """Slack message rendering shared by the webhook and the bot."""

    templates: Templates
    max_alerts: int

    name: str

    def _render_slack(self, notification: Notification, alerts: Sequence[Alert]) -> dict[str, Any]:
        scoped = dataclasses.replace(notification, alerts=list(alerts))
        shown = list(alerts[: self.max_alerts])

        def build(templates: Templates) -> dict[str, Any]:
            context = templates.context(scoped, shown)
            name = Templates.name(TEMPLATE_FOLDER, context["event"], "json")
            message = templates.render_json(name, context)
            check_slack_shape(name, message)
            return cast(dict[str, Any], message)  # check_slack_shape raised unless a JSON object

        return fit_slack_message(render_or_fall_back(self.name, self.templates, build))


def _json_body(response: httpx.Response) -> bool:
    content_type = response.headers.get("content-type", "")
    return "json" in content_type or response.content.lstrip().startswith(b"{")


class SlackWebhook(HttpChannel, _SlackRendering):
    """A Slack incoming webhook: one message per notification, Block Kit with colour bars.

    The message is ``slack/<event>.json.j2``: a header, a context line (counts and the status
    page link) and one coloured attachment per alert. At most ``max_alerts`` alerts are shown
    (the rest summarised as ``… and N more``) so a storm of 200 groups still fits Slack's
    50-block limit in a single message rather than flooding the channel.
    """

    def __init__(
        self,
        url: str | Secret,
        *,
        name: str = "slack",
        templates: Templates | None = None,
        timeout: float = 10.0,
        max_alerts: int = 40,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = Secret(url)
        self.templates = templates or Templates()
        self.max_alerts = max(1, min(max_alerts, SLACK_MAX_BLOCKS - 4))
        super().__init__(name=name, timeout=timeout, secrets=[self.url], transport=transport)

    def policy(self) -> ChannelPolicy:
        """About one message a second per channel: one bucket per webhook URL."""
        return ChannelPolicy(Rate(1, 1), 1, "slack-webhook:" + policy_key(self.url.reveal()))

    async def send(self, notification: Notification) -> Delivery:
        if not notification.alerts:
            return no_alerts()
        try:
            message = self._render_slack(notification, notification.alerts)
        except TemplateError as exc:
            return self._template_failure(exc)
        response = await self._request("POST", self.url.reveal(), body=message)
        if isinstance(response, Delivery):
            return response
        delivery = classify_http(response, self._scrub)
        if delivery.ok and _json_body(response):
            # A webhook answers "ok"; one that answers Web API JSON (a proxy, a gateway, a
            # workspace app) may say ``ok: false`` with a 200: that is not a delivery.
            try:
                data = response.json()
            except ValueError:
                return delivery
            if isinstance(data, dict) and data.get("ok") is False:
                return _not_ok(self._scrub, "webhook", data, response)
        return delivery


SlackMessageRef = MessageRef
"""Where an earlier message lives: a channel *ID* (chat.update needs the ID) and its ts."""


SlackLookup = Callable[[Incident], SlackMessageRef | Awaitable[SlackMessageRef | None] | None]
"""Finds the message an incident was first posted in (sync or async), e.g. from the caller's
store of ``Delivery.meta``."""

_SLACK_TRANSIENT_ERRORS = frozenset(
    {
        "ratelimited",
        "rate_limited",
        "internal_error",
        "fatal_error",
        "service_unavailable",
        "request_timeout",
    }
)
"""Slack Web API ``error`` codes worth retrying; every other ``ok: false`` is final."""


def _not_ok(
    scrub: Callable[[str], str], method: str, data: Any, response: httpx.Response
) -> Delivery:
    """A 200 whose body says ``ok: false``: a failure carrying Slack's error code, retried only
    for the codes that say try again (honouring ``Retry-After`` when given)."""
    error = str(data.get("error", "unknown_error")) if isinstance(data, dict) else "?"
    return Delivery.failure(
        scrub(f"{method}: {error}"),
        retryable=error in _SLACK_TRANSIENT_ERRORS,
        status_code=response.status_code,
        retry_after=parse_retry_after(response.headers.get("retry-after")),
        slack_error=error,
    )


_SLACK_ORIGINAL_GONE = frozenset(
    {"message_not_found", "cant_update_message", "edit_window_closed", "thread_not_found"}
)
"""Errors meaning the original message cannot be followed up; post a new one instead."""


class SlackBot(HttpChannel, _SlackRendering):
    """A Slack app posting with a bot token (``chat:write``), so follow-ups can find the original.

    ``open`` posts a new message with ``chat.postMessage``; its ``channel`` and ``ts`` come back
    in ``Delivery.meta`` for the caller to store per incident. For ``escalate``, ``repeat`` and
    ``resolve`` the original message is found from ``notification.extras["slack_ts"]`` (a ts for
    every alert, or a mapping incident id → ts, with the channel ID in
    ``extras["slack_channel"]``) or from ``lookup(incident)``; then, per ``followup``:
    ``"update"`` rewrites the original with ``chat.update`` (the channel shows the current
    state), ``"thread"`` replies under it (``thread_ts``, a timeline with a notification),
    ``"both"`` does both. ``chat.update`` replaces the whole message, so routes that batch many
    incidents into one message should use ``"thread"``. Alerts with no known original are
    posted as a new message.
    """

    def __init__(
        self,
        token: str | Secret,
        channel: str,
        *,
        api_url: str = "https://slack.com/api",
        name: str = "slack-bot",
        templates: Templates | None = None,
        timeout: float = 10.0,
        followup: Literal["update", "thread", "both"] = "both",
        lookup: SlackLookup | None = None,
        max_alerts: int = 40,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if followup not in ("update", "thread", "both"):
            raise ValueError(f"followup must be 'update', 'thread' or 'both', not {followup!r}")
        self.token = Secret(token)
        self.channel = channel
        self.api_url = api_url.rstrip("/")
        self.templates = templates or Templates()
        self.followup = followup
        self.lookup = lookup
        self.max_alerts = max(1, min(max_alerts, SLACK_MAX_BLOCKS - 4))
        super().__init__(name=name, timeout=timeout, secrets=[self.token], transport=transport)

    def policy(self) -> ChannelPolicy:
        """About one message a second per Slack channel: one bucket per API, token and
        channel."""
        key = policy_key(self.api_url, self.token.reveal(), self.channel)
        return ChannelPolicy(Rate(1, 1), 1, "slack-bot:" + key)

    def refs_to_keep(self, delivery: Delivery) -> dict[str, MessageRef]:
        """The message each incident was posted in anew (not replies in a thread), so that its
        follow-ups update it or reply under it."""
        refs: dict[str, MessageRef] = {}
        for message in delivery.meta.get("messages", []):
            root = message.get("method") == "chat.postMessage" and not message.get("thread_ts")
            if root and message.get("channel") and message.get("ts"):
                ref = MessageRef(str(message["channel"]), str(message["ts"]))
                for incident in message.get("incident_ids", []):
                    refs[incident] = ref
        return refs

    def use_message_store(self, lookup: MessageLookup) -> None:
        """Find originals in the notification store, unless a lookup was given already."""
        if self.lookup is None:
            self.lookup = lookup

    async def send(self, notification: Notification) -> Delivery:
        if not notification.alerts:
            return no_alerts()
        try:
            groups = await self._originals(notification)
            rendered = [
                (ref, alerts, self._render_slack(notification, alerts))
                for ref, alerts in groups.items()
            ]
        except TemplateError as exc:
            return self._template_failure(exc)

        results: list[Delivery] = []
        messages: list[dict[str, Any]] = []
        for ref, alerts, message in rendered:
            if not await self._deliver(ref, alerts, message, results, messages):
                break
        meta: dict[str, Any] = {"messages": messages}
        # The message later follow-ups should target: a fresh post, else the one followed up.
        root = next(
            (m for m in messages if m["method"] == "chat.postMessage" and not m["thread_ts"]), None
        )
        if root is not None:
            meta.update(channel=root["channel"], ts=root["ts"])
        elif isinstance(rendered[0][0], SlackMessageRef):
            meta.update(channel=rendered[0][0].channel, ts=rendered[0][0].ts)
        return combine(results, **meta)

    async def _deliver(
        self,
        ref: SlackMessageRef | None,
        alerts: Sequence[Alert],
        message: dict[str, Any],
        results: list[Delivery],
        messages: list[dict[str, Any]],
    ) -> bool:
        """Post anew (no ``ref``) or follow up on ``ref``; False once a call has failed.

        If the original cannot be followed up (deleted, too old to edit, no permission), the
        alerts are posted as a new message instead: a duplicate beats a lost resolve.
        """
        steps: list[tuple[str, dict[str, str]]] = []
        if ref is None:
            steps.append(("chat.postMessage", {"channel": self.channel}))
        else:
            if self.followup in ("update", "both"):
                steps.append(("chat.update", {"channel": ref.channel, "ts": ref.ts}))
            if self.followup in ("thread", "both"):
                steps.append(("chat.postMessage", {"channel": ref.channel, "thread_ts": ref.ts}))
        for method, target in steps:
            delivery = await self._call(method, {**target, **message})
            if ref is not None and delivery.meta.get("slack_error") in _SLACK_ORIGINAL_GONE:
                return await self._deliver(None, alerts, message, results, messages)
            results.append(delivery)
            if not delivery.ok:
                return False
            messages.append(
                {
                    "method": method,
                    "channel": delivery.meta.get("channel") or target["channel"],
                    "ts": delivery.meta.get("ts"),
                    "thread_ts": target.get("thread_ts"),
                    "incident_ids": [alert.incident.id for alert in alerts],
                }
            )
        return True

    async def _originals(
        self, notification: Notification
    ) -> dict[SlackMessageRef | None, list[Alert]]:
        """Group the alerts by the message each one should follow up on (None: post anew).

        An ``open`` alert is a new incident and always starts a new message.
        """
        given = notification.extras.get("slack_ts")
        channel = notification.extras.get("slack_channel") or self.channel
        groups: dict[SlackMessageRef | None, list[Alert]] = {}
        for alert in notification.alerts:
            ref: SlackMessageRef | None = None
            if alert.event is Event.OPEN:
                pass
            elif isinstance(given, str) and given:
                ref = SlackMessageRef(channel, given)
            elif isinstance(given, Mapping) and given.get(alert.incident.id):
                ref = SlackMessageRef(channel, str(given[alert.incident.id]))
            elif self.lookup is not None:
                found = self.lookup(alert.incident)
                ref = await found if inspect.isawaitable(found) else found
            groups.setdefault(ref, []).append(alert)
        return groups

    async def _call(self, method: str, payload: dict[str, Any]) -> Delivery:
        response = await self._request(
            "POST",
            f"{self.api_url}/{method}",
            body=payload,
            headers={"Authorization": f"Bearer {self.token.reveal()}"},
        )
        if isinstance(response, Delivery):
            return response
        delivery = classify_http(response, self._scrub)
        if not delivery.ok:
            delivery.error = f"{method}: {delivery.error}"
            return delivery
        try:
            data = response.json()
        except ValueError:
            return Delivery.failure(
                f"{method}: HTTP {response.status_code} with a non-JSON body",
                retryable=True,
                status_code=response.status_code,
            )
        if not isinstance(data, dict) or not data.get("ok"):
            return _not_ok(self._scrub, method, data, response)
        return Delivery.success(
            response.status_code, channel=data.get("channel"), ts=data.get("ts")
        )
