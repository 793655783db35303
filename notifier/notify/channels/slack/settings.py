"""The settings of the two Slack channel kinds, as a receiver's entry gives them."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from notifier.config import ChannelSettings, HttpUrl, Rate, RateValue, SecretUrl, SecretValue
from notifier.config.secrets import redact_url


class SlackWebhookConfig(ChannelSettings):
    """``slack_webhook``: an incoming webhook's URL (itself the credential)."""

    url: SecretUrl
    max_alerts: Annotated[int, Field(ge=1, le=46)] = 40
    rate: RateValue = Rate(1, 1)

    burrow_class: ClassVar[str] = "slack"

    def burrow_fields(self) -> dict[str, Any]:
        return {"url-open": redact_url(self.url.reveal())}


class SlackBotConfig(ChannelSettings):
    """``slack_bot``: a bot token and the channel it posts in; follow-ups update the first
    message, reply in its thread, or both."""

    token: SecretValue
    channel: str
    followup: Literal["update", "thread", "both"] = "both"
    api_url: HttpUrl = "https://slack.com/api"
    max_alerts: Annotated[int, Field(ge=1, le=46)] = 40
    rate: RateValue = Rate(1, 1)

    burrow_class: ClassVar[str] = "slack"

    def burrow_fields(self) -> dict[str, Any]:
        return {"channel": self.channel, "api-url": self.api_url}
