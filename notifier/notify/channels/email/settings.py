"""The settings of the ``email`` channel kind, as a receiver's entry gives them."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator

from notifier.config import ChannelSettings, SecretValue


class EmailConfig(ChannelSettings):
    """``email``: an SMTP server, the sender and the recipients (one or a list)."""

    host: str
    port: Annotated[int, Field(ge=1, le=65535)] | None = None
    sender: str
    recipients: Annotated[list[str], Field(min_length=1)]
    username: str | None = None
    password: SecretValue | None = None
    tls: Literal["starttls", "implicit", "none"] = "starttls"
    validate_certs: bool = True

    burrow_class: ClassVar[str] = "email"

    @field_validator("recipients", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    def burrow_fields(self) -> dict[str, Any]:
        return {"server": self.host, "port": self.port or 0,
                "auth-type": "plain" if self.username else "",
                "username": self.username or "", "from": self.sender,
                "to": ",".join(self.recipients), "tls": self.tls}  # fmt: skip
