"""The settings of the ``pagerduty`` channel kind, as a receiver's entry gives them."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from notifier.config import ChannelSettings, HttpUrl, Rate, RateValue, SecretValue

PAGERDUTY_SEVERITIES = ("critical", "error", "warning", "info")


class PagerDutyConfig(ChannelSettings):
    """``pagerduty``: an Events API v2 routing key, and the PagerDuty severity of each of ours."""

    routing_key: SecretValue
    url: HttpUrl = "https://events.pagerduty.com/v2/enqueue"
    severity_map: dict[Literal["WARN", "ERR"], str] = Field(
        default_factory=lambda: {"WARN": "warning", "ERR": "error"}  # type: ignore[arg-type]
    )
    rate: RateValue = Rate(120, 60)

    burrow_class: ClassVar[str] = "pagerduty"

    @field_validator("severity_map")
    @classmethod
    def _known(cls, value: dict[str, str]) -> dict[str, str]:
        wrong = sorted(v for v in value.values() if v not in PAGERDUTY_SEVERITIES)
        if wrong:
            raise ValueError(
                f"PagerDuty severities must be one of {sorted(PAGERDUTY_SEVERITIES)}, not {wrong}"
            )
        return value

    def burrow_fields(self) -> dict[str, Any]:
        return {"url-open": self.url}
