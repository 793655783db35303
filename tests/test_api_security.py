"""How the API is secured, as an operator sees it: on loopback it is open; beyond loopback
every writing endpoint needs the configured token (403 without one configured, 401 without the
right one, compared in constant time), reads stay open; `check` warns as `run` does; HTTPS
(and optionally client certificates) from files in the config, checked when it is read."""

from __future__ import annotations

import shutil
import ssl
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
import trustme
from click.testing import CliRunner, Result

from notifier.api import ApiServer, create_app
from notifier.api import auth as api_auth
from notifier.cli import main
from notifier.config import TlsConfig, is_loopback
from notifier.notify import Notifier
from notifier.notify.config import parse_notify
from notifier.rules import load_rules
from notifier.service import Coordinator

from .scripted import drive, replayed_service
from .service_process import ServiceProcess

ROOT = Path(__file__).resolve().parents[1]
LATER = datetime.fromtimestamp(time.time() + 30 * 86400, UTC).isoformat()
"""A silence's end within ``notify.silence_limits.max_silence_ends_in`` of the notifier's
(wall) clock."""
SILENCE = {"matchers": ['group="payments"'], "ends_at": LATER,
           "author": "ops", "comment": "maintenance"}  # fmt: skip


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("[::1]", True),
     ("localhost", True), ("LOCALHOST", True), ("0.0.0.0", False), ("::", False),
     ("10.1.2.3", False), ("notifier.internal", False), ("", False)],
)  # fmt: skip
def test_only_127_0_0_0_8_ipv6_loopback_and_localhost_count_as_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_the_token_comes_from_the_environment_or_a_file_and_empty_means_none(tmp_path):
    from notifier.config import parse_service_config

    def api_of(token: object, env: dict[str, str] | None = None):
        data = {"clusters": [{"name": "a", "bootstrap_servers": "h:1"}],
                "api": {"host": "0.0.0.0", "token": token}}  # fmt: skip
        return parse_service_config(data, "svc.yaml", env or {}).api

    secret_file = tmp_path / "api-token"
    secret_file.write_text("Tk-from-a-file\n")
    from_env = api_of("${API_TOKEN}", {"API_TOKEN": "Tk-4d9f0c2b7a61e8"})
    assert from_env.token is not None and from_env.token.reveal() == "Tk-4d9f0c2b7a61e8"
    assert "Tk-4d9f" not in repr(from_env) and "Tk-4d9f" not in from_env.model_dump_json()
    assert api_of({"file": str(secret_file)}).token.reveal() == "Tk-from-a-file"
    for empty in ("${API_TOKEN:-}", "", "  ", None):
        unset = api_of(empty)
        assert unset.token is None and unset.writes_refused is not None


# ---------------------------------------------------------------------------------------------
# Writing endpoints


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """The sample history replayed through a coordinator, with a notifier for silences."""
    import asyncio

    tmp = tmp_path_factory.mktemp("replayed")
    history = ROOT / "examples" / "sample-history.csv"
    coord, script = replayed_service(tmp, history, load_rules(ROOT / "rules.yaml"))
    asyncio.run(drive(coord, len(script), "demo"))
    config = parse_notify({"receivers": {"hooks": {"webhook": {"url": "http://127.0.0.1:9/h"}}},
                           "route": {"receiver": "hooks"}})  # fmt: skip
    return coord, Notifier(config, tmp / "notify.sqlite")


def api(replayed, token: str | None = None, host: str = "127.0.0.1") -> httpx.AsyncClient:
    coord, notifier = replayed
    app = create_app(coord, notifier, token, host=host)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://notifier")


async def writing_routes(http: httpx.AsyncClient) -> list[tuple[str, str]]:
    """(method, path) of every writing endpoint the OpenAPI document lists."""
    doc = (await http.get("/openapi.json")).json()
    return [
        (method.upper(), path.replace("{silence_id}", "some-silence"))
        for path, methods in doc["paths"].items()
        for method in methods
        if method.upper() in api_auth.WRITING_METHODS
    ]


async def test_beyond_loopback_without_a_token_every_write_is_refused_with_403(replayed):
    async with api(replayed, host="0.0.0.0") as http:
        routes = await writing_routes(http)
        assert {("POST", "/api/silences"), ("DELETE", "/api/silences/some-silence")} <= set(routes)
        for method, path in routes:
            # A token nobody configured opens nothing either.
            headers = {"Authorization": "Bearer guessed"}
            refused = await http.request(method, path, json=SILENCE, headers=headers)
            assert refused.status_code == 403, (method, path)
            body = refused.json()
            assert body["error"] is True
            assert body["message"] == (
                "writing endpoints are disabled: the API listens on 0.0.0.0, which is not "
                "loopback, and no api.token is configured (set api.token, then send "
                "'Authorization: Bearer <token>')"
            )
        assert (await http.get("/api/silences")).json() == {"silences": [], "next": None}
        assert (await http.get("/v3/kafka/demo/consumer/stalled/status")).status_code == 200
        assert (await http.get("/metrics")).status_code == 200


async def test_on_loopback_without_a_token_writes_are_open(replayed):
    async with api(replayed, host="127.0.0.1") as http:
        created = await http.post("/api/silences", json=SILENCE)
        assert created.status_code == 201, created.text
        silence_id = created.json()["silence"]["id"]
        assert (await http.delete(f"/api/silences/{silence_id}")).status_code == 200


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1"])
async def test_with_a_token_a_write_needs_it_as_a_bearer_token(replayed, host):
    token = "Tk-4d9f0c2b7a61e8"
    async with api(replayed, token=token, host=host) as http:
        wrong = ["", "Bearer wrong", f"Basic {token}", f"Bearer {token}x", token]
        for authorization in wrong:
            headers = {"Authorization": authorization} if authorization else {}
            refused = await http.post("/api/silences", json=SILENCE, headers=headers)
            assert refused.status_code == 401, authorization
            assert refused.headers["www-authenticate"] == 'Bearer realm="notifier"'
            assert refused.json()["message"] == (
                "this endpoint changes the service's state: send 'Authorization: Bearer "
                "<api.token>'"
            )
            assert token not in refused.text
        created = await http.post(
            "/api/silences", json=SILENCE, headers={"Authorization": f"bearer {token}"}
        )
        assert created.status_code == 201, created.text
        silence_id = created.json()["silence"]["id"]
        path = f"/api/silences/{silence_id}"
        assert (await http.delete(path)).status_code == 401
        deleted = await http.delete(path, headers={"Authorization": f"Bearer {token}"})
        assert deleted.status_code == 200
        assert (await http.get("/api/silences")).status_code == 200  # reading needs no token


async def test_the_token_is_compared_in_constant_time(replayed, monkeypatch):
    compared: list[tuple[bytes, bytes]] = []
    real = api_auth.hmac.compare_digest

    def spy(a, b):
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(api_auth.hmac, "compare_digest", spy)
    async with api(replayed, token="Tk-4d9f0c2b7a61e8", host="0.0.0.0") as http:
        await http.post("/api/silences", json=SILENCE, headers={"Authorization": "Bearer nope"})
    assert compared == [(b"nope", b"Tk-4d9f0c2b7a61e8")]


# ---------------------------------------------------------------------------------------------
# check and run agree


def invoke(*args: str, env: dict[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env)  # type: ignore[arg-type]


def service_file(tmp_path: Path, api: str, data_dir: Path | None = None) -> Path:
    shutil.copy(ROOT / "rules.yaml", tmp_path / "rules.yaml")
    path = tmp_path / "service.yaml"
    path.write_text(
        "clusters: [{name: prod, bootstrap_servers: '127.0.0.1:1', scan_interval: 1s}]\n"
        f"data_dir: {data_dir or tmp_path / 'data'}\n"
        f"api: {api}\n"
    )
    return path


WARNING = (
    "warning: api: writing endpoints are disabled: the API listens on 0.0.0.0, which is not "
    "loopback, and no api.token is configured"
)


def test_check_warns_that_writes_are_disabled_beyond_loopback_without_a_token(tmp_path):
    open_everywhere = invoke("check", "--config", str(service_file(tmp_path, "{host: 0.0.0.0}")))
    assert open_everywhere.exit_code == 0, open_everywhere.output
    assert WARNING in open_everywhere.output

    path = service_file(tmp_path, "{host: 0.0.0.0, token: '${API_TOKEN}'}")
    with_token = invoke("check", "--config", str(path), env={"API_TOKEN": "Tk-4d9f0c2b7a61e8"})
    assert with_token.exit_code == 0 and "warning" not in with_token.output
    loopback = invoke("check", "--config", str(service_file(tmp_path, "{port: 8123}")))
    assert loopback.exit_code == 0 and "warning" not in loopback.output


def test_the_docker_example_takes_its_token_from_the_environment(tmp_path):
    # As in the image: the default rules beside the config.
    shutil.copy(ROOT / "rules.yaml", tmp_path / "rules.yaml")
    docker = shutil.copy(ROOT / "examples" / "docker.yaml", tmp_path / "docker.yaml")
    env: dict[str, str | None] = {
        "KAFKA_BOOTSTRAP": "kafka:9092",
        "SLACK_WEBHOOK_URL": "https://hooks.slack.example/services/T0/B0/x",
        "NOTIFIER_API_TOKEN": None,
    }
    without = invoke("check", "--config", str(docker), env=env)
    assert without.exit_code == 0, without.output
    assert WARNING in without.output
    env["NOTIFIER_API_TOKEN"] = "Tk-4d9f0c2b"
    with_token = invoke("check", "--config", str(docker), env=env)
    assert with_token.exit_code == 0 and "warning" not in with_token.output


async def test_run_beyond_loopback_without_a_token_warns_at_start_and_refuses_writes(tmp_path):
    config = service_file(tmp_path, "{host: 0.0.0.0, port: 0}")
    async with ServiceProcess(config, tmp_path / "service.log") as service:
        warning = await service.wait_for_log(
            lambda line: line.get("event") == "api_writes_disabled"
        )
        url = service.url.replace("0.0.0.0", "127.0.0.1")
        async with httpx.AsyncClient(base_url=url) as http:
            refused = await http.post("/api/silences", json=SILENCE)
            health = await http.get("/healthz")
    assert warning["level"] == "warning" and warning["logger"] == "notifier.api.server"
    assert warning["msg"].startswith(WARNING.removeprefix("warning: api: "))
    assert refused.status_code == 403 and "api.token" in refused.json()["message"]
    assert health.status_code == 200


# ---------------------------------------------------------------------------------------------
# TLS


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    """A throwaway certificate authority, trusted by nothing but these tests."""
    return trustme.CA()


def server_files(ca: trustme.CA, directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost signed by ``ca``, and its key, as files."""
    issued = ca.issue_cert("127.0.0.1", "localhost")
    cert, key = directory / "server.pem", directory / "server.key"
    issued.cert_chain_pems[0].write_to_path(str(cert))
    issued.private_key_pem.write_to_path(str(key))
    return cert, key


def trusting(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


async def test_the_service_serves_https_with_the_configured_certificate(ca, tmp_path):
    server_files(ca, tmp_path)
    # Relative paths: taken from the config file's directory, wherever the service starts.
    config = service_file(tmp_path, "{port: 0, tls: {cert_file: server.pem, key_file: server.key}}")
    async with ServiceProcess(config, tmp_path / "service.log") as service:
        assert service.url.startswith("https://127.0.0.1:")
        async with httpx.AsyncClient(base_url=service.url, verify=trusting(ca)) as http:
            health = await http.get("/healthz")
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            async with httpx.AsyncClient(verify=ssl.create_default_context()) as untrusting:
                await untrusting.get(service.url + "healthz")
        plain = service.url.replace("https://", "http://")
        with pytest.raises(httpx.HTTPError):
            async with httpx.AsyncClient() as http:
                await http.get(plain + "healthz")
    assert health.status_code == 200 and health.json() == {"status": "ok"}


async def test_with_a_client_ca_only_clients_with_its_certificates_get_in(ca, tmp_path, replayed):
    cert, key = server_files(ca, tmp_path)
    clients = trustme.CA()
    clients.cert_pem.write_to_path(str(tmp_path / "clients.pem"))
    tls = TlsConfig(cert_file=str(cert), key_file=str(key),
                    client_ca_file=str(tmp_path / "clients.pem"))  # fmt: skip
    assert tls.problems() == []
    server = ApiServer(create_app(replayed[0]), "127.0.0.1", 0, tls=tls)
    await server.start()
    try:
        with_cert = trusting(ca)
        clients.issue_cert("ops@example.com").configure_cert(with_cert)
        async with httpx.AsyncClient(verify=with_cert) as http:
            admitted = await http.get(server.url + "healthz")
        with pytest.raises(httpx.HTTPError):
            async with httpx.AsyncClient(verify=trusting(ca)) as http:
                await http.get(server.url + "healthz")
    finally:
        await server.stop()
    assert admitted.status_code == 200


@pytest.fixture
def run_never_starts(monkeypatch):
    async def started(self, companions):
        raise AssertionError("notifier run accepted the config and started")

    monkeypatch.setattr(Coordinator, "run_until_signalled", started)


def encrypted_key(path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    path.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"passphrase"),
    ))  # fmt: skip


@pytest.mark.parametrize(
    ("tls", "problem"),
    [
        ("{cert_file: missing.pem, key_file: server.key}",
         "api.tls.cert_file: no such file: {dir}/missing.pem"),
        ("{cert_file: server.pem, key_file: missing.key}",
         "api.tls.key_file: no such file: {dir}/missing.key"),
        ("{cert_file: server.key, key_file: server.key}",
         "api.tls.cert_file: {dir}/server.key: expected a PEM certificate"),
        ("{cert_file: server.pem, key_file: other.key}",
         "api.tls.key_file: {dir}/other.key: is not the private key of api.tls.cert_file"),
        ("{cert_file: server.pem, key_file: encrypted.key}",
         "api.tls.key_file: {dir}/encrypted.key: the key is encrypted; expected an unencrypted "
         "PEM private key"),
        ("{cert_file: server.pem, key_file: server.pem}",
         "api.tls.key_file: {dir}/server.pem: expected a PEM private key"),
        ("{cert_file: server.pem, key_file: server.key, client_ca_file: server.key}",
         "api.tls.client_ca_file: {dir}/server.key: expected PEM CA certificates"),
        ("{cert_file: server.pem}", "api.tls.key_file: Field required"),
    ],
    ids=["no cert", "no key", "key as cert", "other key", "encrypted key", "cert as key",
         "key as client CA", "key not given"],
)  # fmt: skip
def test_check_and_run_refuse_tls_files_that_cannot_serve_naming_file_and_field(
    ca, tmp_path, tls, problem, run_never_starts
):
    server_files(ca, tmp_path)
    ca.issue_cert("elsewhere").private_key_pem.write_to_path(str(tmp_path / "other.key"))
    encrypted_key(tmp_path / "encrypted.key")
    config = service_file(tmp_path, f"{{tls: {tls}}}")
    checked = invoke("check", "--config", str(config))
    ran = invoke("run", "--config", str(config))
    assert checked.exit_code == 1 and ran.exit_code == 2
    expected = problem.format(dir=tmp_path)
    for output in (checked.output, ran.output):
        assert f"{config}: 1 problem(s)" in output and f"  {expected}" in output, output
