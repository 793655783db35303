"""Talking to a running service: where it is, the token, the HTTP calls, and errors a person
can act on.

Every failure becomes a :class:`ClientError` whose message names the URL and says what to do
(a refused connection, a missing or wrong token, an answer that is not the notifier's), and
whose exit code is :data:`EXIT_CANNOT_ASK`: a script gating a deploy tells "the group is in
ERR" (:data:`EXIT_FAILED`) from "the service could not be asked".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote

import httpx

from notifier.config import ApiConfig, ConfigError, read_yaml, substitute_env

EXIT_OK = 0
EXIT_FAILED = 1
"""What was asked about is unhealthy (``status --fail-on``), or a test notification failed."""
EXIT_CANNOT_ASK = 2
"""The service could not be asked: not reachable, the token refused, a bad request or config."""

DEFAULT_URL = "http://127.0.0.1:8000"
"""Where ``notifier run`` serves its API unless the config says otherwise."""

TOKEN_VARIABLE = "NOTIFIER_API_TOKEN"
"""The environment variable the bearer token is read from (the example configs give the
service its ``api.token`` from the same variable)."""

URL_VARIABLE = "NOTIFIER_URL"

TIMEOUT_S = 10.0


class ClientError(Exception):
    """A request to the service failed; the message is one line for a person to act on."""

    def __init__(
        self, message: str, exit_code: int = EXIT_CANNOT_ASK, status_code: int | None = None
    ) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.status_code = status_code
        """The service's HTTP status, when it answered."""


@dataclass(frozen=True, slots=True)
class Target:
    """Which service to ask and with what token."""

    url: str
    token: str | None
    token_source: str | None
    """Where the token came from (``$NOTIFIER_API_TOKEN``, or the config file), for messages."""


def find_target(
    url: str | None, config: Path | None, environ: Mapping[str, str] | None = None
) -> Target:
    """The URL: ``url`` if given, else the config's API (``api.public_url``, or its host and
    port), else :data:`DEFAULT_URL`. The token: ``$NOTIFIER_API_TOKEN``, else the config's
    ``api.token`` when it is a value rather than an unset ``${VARIABLE}``."""
    env = os.environ if environ is None else environ
    api = read_api_section(config, env) if config is not None else None
    if url is None and api is not None:
        url = api_url(api, config)
    token, source = env.get(TOKEN_VARIABLE) or None, f"${TOKEN_VARIABLE}"
    configured = api.token.reveal() if api is not None and api.token is not None else ""
    if token is None and configured and "${" not in configured:
        token, source = configured, f"api.token of {config}"
    return Target((url or DEFAULT_URL).rstrip("/"), token, source if token else None)


def read_api_section(path: Path, env: Mapping[str, str]) -> ApiConfig:
    """The ``api:`` section of a service config, variables substituted where they are set (the
    rest of the file, and its notify secrets, need not be resolvable here)."""
    data = read_yaml(path)
    section = data.get("api", {}) if isinstance(data, dict) else {}
    section, _ = substitute_env(section or {}, env, strict=False, path="api")
    try:
        return ApiConfig.model_validate(section)
    except ValueError as exc:
        raise ConfigError(str(path), [("api", str(exc).splitlines()[-1].strip())]) from None


def api_url(api: ApiConfig, config: Path | None) -> str:
    """How a client on this machine reaches the service a config describes."""
    if not api.enabled:
        raise ClientError(f"{config}: api.enabled is false: that service serves no API to ask")
    if api.public_url:
        return api.public_url
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(api.host, api.host)
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{api.port}"


class ServiceClient:
    """The API calls the commands make (``/api/groups``, ``/api/incidents``,
    ``/api/silences``), each returning the decoded JSON body or raising :class:`ClientError`."""

    def __init__(self, target: Target, *, transport: httpx.BaseTransport | None = None) -> None:
        self.target = target
        headers = {"Accept": "application/json", "User-Agent": "notifier-cli"}
        if target.token:
            headers["Authorization"] = f"Bearer {target.token}"
        self._http = httpx.Client(
            base_url=target.url, headers=headers, timeout=TIMEOUT_S, transport=transport
        )

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._http.close()

    # ---- the calls (each body's shape is the one its endpoint's response model declares)

    def groups(self) -> dict[str, Any]:
        """``{"groups": [...], "clusters": [...]}``: every group's last result, each cluster's
        scan health."""
        return cast(dict[str, Any], self._request("GET", "/api/groups"))

    def incidents(self) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self._request("GET", "/api/incidents")["incidents"])

    def silences(self) -> list[dict[str, Any]]:
        """Every silence, following the pages (``next``) to the last."""
        found: list[dict[str, Any]] = []
        path = "/api/silences"
        while True:
            body = self._request("GET", path)
            found.extend(body["silences"])
            cursor = body.get("next")  # a service from before pages sends them all at once
            if not cursor:
                return found
            path = f"/api/silences?after={quote(cursor, safe='')}"

    def notifications_configured(self) -> bool:
        """Whether the service has receivers: without a ``notify:`` section it keeps no
        silences, and says so with a 404 on ``/api/silences``."""
        try:
            self._request("GET", "/api/silences")
        except ClientError as exc:
            if exc.status_code == 404:
                return False
            raise
        return True

    def add_silence(
        self, matchers: list[str], *, ends_at_ms: int, author: str, comment: str
    ) -> dict[str, Any]:
        body = {"matchers": matchers, "ends_at": ends_at_ms, "author": author, "comment": comment}
        return cast(dict[str, Any], self._request("POST", "/api/silences", json=body)["silence"])

    def expire_silence(self, silence_id: str) -> None:
        self._request("DELETE", f"/api/silences/{silence_id}")

    # ---- the plumbing

    def _request(self, method: str, path: str, json: Any = None) -> Any:
        url = self.target.url + path
        try:
            response = self._http.request(method, path, json=json)
        except httpx.ConnectError as exc:
            reason = "connection refused" if "refused" in str(exc).lower() else str(exc)
            raise ClientError(
                f"cannot reach the notifier service at {self.target.url}: {reason} (is "
                f"`notifier run` serving there? --url or --config say where it is)"
            ) from None
        except httpx.TimeoutException:
            raise ClientError(f"{url}: no answer within {TIMEOUT_S:g} s") from None
        except httpx.HTTPError as exc:
            raise ClientError(f"{url}: {exc or type(exc).__name__}") from None
        body = _json_body(response)
        if response.status_code in (401, 403):
            raise self._refused(response.status_code)
        if response.is_error:
            message = f"{method} {url}: {_error_message(response, body)}"
            raise ClientError(message, status_code=response.status_code)
        if body is None:
            kind = response.headers.get("content-type", "no content type")
            raise ClientError(
                f"{url} did not answer as a notifier service (HTTP {response.status_code}, "
                f"{kind}): check --url"
            )
        return body

    def _refused(self, status_code: int) -> ClientError:
        if self.target.token is None:
            return ClientError(
                f"{self.target.url} refused the request ({status_code}): it needs a bearer "
                f"token; set {TOKEN_VARIABLE} to the service's api.token"
            )
        return ClientError(
            f"{self.target.url} refused the token from {self.target.token_source} "
            f"({status_code}): it is not the service's api.token"
        )


def _json_body(response: httpx.Response) -> Any:
    if "json" not in response.headers.get("content-type", ""):
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _error_message(response: httpx.Response, body: Any) -> str:
    """The service's own words (its error bodies have ``message`` and, for a 422, the
    ``problems`` by field), else the status line."""
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        problems = body.get("problems") or []
        details = "; ".join(
            f"{p.get('field')}: {p.get('problem')}" for p in problems if isinstance(p, dict)
        )
        return f"{body['message']} ({details})" if details else body["message"]
    return f"HTTP {response.status_code} {response.reason_phrase}"
