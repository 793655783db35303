"""The settings of the ``webhook`` channel kind, as a receiver's entry gives them."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from notifier.config import ChannelSettings, SecretUrl, SecretValue
from notifier.config.base import FrozenModel
from notifier.config.secrets import redact_url


class BasicAuthConfig(FrozenModel):
    username: str
    password: SecretValue


class WebhookConfig(ChannelSettings):
    """``webhook``: any HTTP receiver, with the documented JSON body or a body template."""

    url: SecretUrl
    method: Literal["POST", "PUT", "PATCH"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict)
    basic_auth: BasicAuthConfig | None = None
    bearer_token: SecretValue | None = None
    body_template: str | None = None
    """A template name (``webhook/text.json.j2``) or a path to a template file."""

    burrow_class: ClassVar[str] = "http"

    @field_validator("method", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_auth(self) -> WebhookConfig:
        if self.basic_auth is not None and self.bearer_token is not None:
            raise ValueError("use either basic_auth or bearer_token, not both")
        return self

    def burrow_fields(self) -> dict[str, Any]:
        auth: Literal["basic", "bearer", "none"] = (
            "basic" if self.basic_auth else "bearer" if self.bearer_token else "none"
        )
        return {"url-open": redact_url(self.url.reveal()), "method-open": self.method,
                "auth-type": auth, "headers": sorted(self.headers),
                "template-open": self.body_template or ""}  # fmt: skip
