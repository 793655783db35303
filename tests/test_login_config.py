"""The ``security`` section of a cluster as ``notifier check`` sees it: every mechanism the
README shows is accepted, an incomplete or contradictory one is refused by field name, and a
mechanism whose optional package is missing names the package and the extra that installs it."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import trustme
import yaml

from notifier.config import ConfigError, load_service_config, parse_service_config

README = Path(__file__).resolve().parents[1] / "README.md"
ENV = {"KAFKA_PASSWORD": "pw-0123456", "KAFKA_OAUTH_CLIENT_SECRET": "oidc-0123456",
       "KAFKA_SSL_KEY_PASSWORD": "key-0123456"}  # fmt: skip
HAS_GSSAPI = importlib.util.find_spec("gssapi") is not None


def readme_examples() -> list[str]:
    """The YAML blocks of the README's Authentication section."""
    text = README.read_text()
    section = text.split("\n## Authentication\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```yaml\n(.*?)```", section, flags=re.S)


def problems(config: str, env: dict[str, str] | None = None) -> list[tuple[str, str]]:
    try:
        parse_service_config(yaml.safe_load(config), "service.yaml", env or ENV)
    except ConfigError as exc:
        return exc.problems
    return []


def test_the_readme_shows_every_mechanism():
    mechanisms = set()
    for example in readme_examples():
        security = yaml.safe_load(example)["clusters"][0]["security"]
        mechanism = security.get("sasl_mechanism", security["protocol"])
        mechanisms.add("MSK IAM" if "msk_iam" in security else mechanism)
    assert mechanisms == {"PLAIN", "SCRAM-SHA-512", "OAUTHBEARER", "MSK IAM", "GSSAPI", "SSL"}


@pytest.mark.parametrize("example", readme_examples(), ids=lambda e: e.split("name: ")[1][:8])
def test_every_readme_example_is_a_valid_config(example: str):
    found = problems(example)
    if "GSSAPI" in example and not HAS_GSSAPI:
        assert found == [("clusters.corp.security.sasl_mechanism",
                          "GSSAPI needs the Python package gssapi, which is not installed: pip "
                          "install 'notifier[kerberos]'; it builds against the system's Kerberos "
                          "(Debian: libkrb5-dev)")]  # fmt: skip
    else:
        assert found == []


def cluster(security: str) -> str:
    return "clusters:\n  - name: prod\n    bootstrap_servers: b:9093\n    security:\n" + (
        textwrap.indent(textwrap.dedent(security), "      ")
    )


@pytest.mark.parametrize(
    ("security", "expected"),
    [
        ("protocol: SASL_SSL\nsasl_mechanism: OAUTHBEARER\noauth: {client_id: n, "
         "client_secret: s}\n",
         [("clusters.prod.security.oauth.token_url", "required for sasl_mechanism OAUTHBEARER")]),
        ("protocol: SASL_SSL\nsasl_mechanism: OAUTHBEARER\noauth: {token_url: 'https://i/t'}\n",
         [("clusters.prod.security.oauth.client_id", "required for sasl_mechanism OAUTHBEARER"),
          ("clusters.prod.security.oauth.client_secret",
           "required for sasl_mechanism OAUTHBEARER")]),
        ("protocol: SASL_SSL\nsasl_mechanism: OAUTHBEARER\n",
         [("clusters.prod.security.oauth", "required for sasl_mechanism OAUTHBEARER: an OIDC "
           "token endpoint (token_url, client_id, client_secret), or msk_iam (region) for "
           "Amazon MSK")]),
        ("protocol: SASL_SSL\nsasl_mechanism: OAUTHBEARER\nmsk_iam: {}\n",
         [("clusters.prod.security.msk_iam.region", "required for sasl_mechanism OAUTHBEARER")]),
        ("protocol: SASL_SSL\nsasl_mechanism: OAUTHBEARER\nmsk_iam: {region: eu-west-1}\n"
         "oauth: {token_url: 'https://i/t', client_id: n, client_secret: s}\n",
         [("clusters.prod.security.msk_iam", "set either oauth or msk_iam, not both")]),
        ("protocol: SASL_SSL\nsasl_mechanism: OAUTHBEARER\nmsk_iam: {region: Ireland}\n",
         [("clusters.prod.security.msk_iam.region",
           "String should match pattern '^[a-z]{2}(-[a-z]+)+-\\d+$' (got 'Ireland')")]),
        ("protocol: SASL_SSL\nsasl_mechanism: OAUTHBEARER\nsasl_username: u\n"
         "msk_iam: {region: eu-west-1}\n",
         [("clusters.prod.security.sasl_username", "only used with sasl_mechanism PLAIN or "
           "SCRAM-SHA-256 or SCRAM-SHA-512, not OAUTHBEARER")]),
        ("protocol: SASL_SSL\nsasl_mechanism: SCRAM-SHA-256\nsasl_username: u\n",
         [("clusters.prod.security.sasl_password", "required for sasl_mechanism SCRAM-SHA-256")]),
        ("protocol: SASL_SSL\nsasl_mechanism: PLAIN\nsasl_username: u\nsasl_password: p\n"
         "oauth: {token_url: 'https://i/t'}\n",
         [("clusters.prod.security.oauth",
           "only used with sasl_mechanism OAUTHBEARER, not PLAIN")]),
        ("protocol: SSL\nsasl_mechanism: OAUTHBEARER\nmsk_iam: {region: eu-west-1}\n",
         [("clusters.prod.security.msk_iam", "only used with SASL (protocol is SSL)"),
          ("clusters.prod.security.protocol",
           "sasl_mechanism OAUTHBEARER needs protocol SASL_SSL or SASL_PLAINTEXT, not SSL")]),
        ("protocol: SASL_SSL\nsasl_mechanism: KERBEROS\n",
         [("clusters.prod.security.sasl_mechanism", "Input should be 'PLAIN', 'SCRAM-SHA-256', "
           "'SCRAM-SHA-512', 'OAUTHBEARER' or 'GSSAPI' (got 'KERBEROS')")]),
        ("protocol: SASL_SSL\nsasl_mechanism: OAUTHBEARER\n"
         "oauth: {token_url: 'ftp://i/t', client_id: n, client_secret: s}\n",
         [("clusters.prod.security.oauth.token_url",
           "expected an http:// or https:// URL with a host (got 'ftp://i/t')")]),
    ],
)  # fmt: skip
def test_an_incomplete_or_contradictory_login_is_refused_by_field(
    security: str, expected: list[tuple[str, str]]
):
    assert sorted(problems(cluster(security))) == sorted(expected)


def test_the_client_secret_is_never_shown_in_an_error():
    secret = "oidc-Leak-Canary-42"
    found = problems(cluster(
        "protocol: SASL_SSL\nsasl_mechanism: OAUTHBEARER\n"
        "oauth: {token_url: 'https://i/t', client_id: 7, client_secret: {file: /no/such}}\n"
    ), {})  # fmt: skip
    assert ("clusters.prod.security.oauth.client_secret",
            "cannot read secret file /no/such: No such file or directory") in found  # fmt: skip
    config = parse_service_config(yaml.safe_load(cluster(
        "protocol: SASL_SSL\nsasl_mechanism: OAUTHBEARER\n"
        "oauth: {token_url: 'https://i/t', client_id: n, client_secret: '${S}'}\n"
    )), "service.yaml", {"S": secret})  # fmt: skip
    assert secret not in repr(config) and secret not in config.model_dump_json()


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=os.environ | {"PYTHONPATH": os.getcwd()})  # fmt: skip


WITHOUT_GSSAPI = "import sys; sys.modules['gssapi'] = None  # as if it were not installed\n"


def test_gssapi_without_its_package_names_the_package():
    checked = run_python(
        WITHOUT_GSSAPI
        + textwrap.dedent("""
        import yaml
        from notifier.config import ConfigError, load_service_config, parse_service_config
        try:
            parse_service_config(yaml.safe_load('''
        clusters:
          - name: corp
            bootstrap_servers: k:9092
            security: {protocol: SASL_SSL, sasl_mechanism: GSSAPI}
        '''), "service.yaml", {})
        except ConfigError as exc:
            print(exc)
        from notifier.collect import ClusterCollector
        try:
            ClusterCollector("k:9092", security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI")
        except ValueError as exc:
            print(exc)
    """)
    )
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.splitlines() == [
        "service.yaml: 1 problem(s)",
        "  clusters.corp.security.sasl_mechanism: GSSAPI needs the Python package gssapi, which "
        "is not installed: pip install 'notifier[kerberos]'; it builds against the system's "
        "Kerberos (Debian: libkrb5-dev)",
        "GSSAPI needs the Python package gssapi, which is not installed: pip install "
        "'notifier[kerberos]'",
    ]


@pytest.mark.skipif(not HAS_GSSAPI, reason="the gssapi package is not installed (kerberos extra)")
async def test_gssapi_with_its_package_is_handed_to_aiokafka():
    from aiokafka import conn

    from notifier.collect import ClusterCollector

    assert conn.gssapi is not None  # aiokafka found it too
    collector = ClusterCollector(
        "kafka-1.corp.example.com:9092",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="GSSAPI",
        sasl_kerberos_service_name="kafka",
        sasl_kerberos_domain_name="kafka.corp.example.com",
    )
    await collector.close()


def test_check_names_a_token_endpoint_ca_file_it_cannot_read(tmp_path: Path):
    config = tmp_path / "service.yaml"
    config.write_text(cluster(
        "protocol: SASL_SSL\nsasl_mechanism: OAUTHBEARER\n"
        f"oauth: {{token_url: 'https://i/t', client_id: n, client_secret: s, "
        f"ca_file: {tmp_path / 'idp-ca.pem'}}}\n"))  # fmt: skip
    with pytest.raises(ConfigError) as failure:
        load_service_config(config)
    assert failure.value.problems == [("clusters.prod.security.oauth.ca_file",
                                       f"no such file: {tmp_path / 'idp-ca.pem'}")]  # fmt: skip


def test_check_accepts_every_mechanism(tmp_path: Path):
    ca = trustme.CA()
    client = ca.issue_cert("lag-notifier@example.com")
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    client.cert_chain_pems[0].write_to_path(str(tmp_path / "client.pem"))
    client.private_key_pem.write_to_path(str(tmp_path / "client.key"))
    examples = [yaml.safe_load(e)["clusters"][0] for e in readme_examples()]
    if not HAS_GSSAPI:
        examples = [c for c in examples if c["security"].get("sasl_mechanism") != "GSSAPI"]
    for example in examples:
        security = example["security"]
        for field, name in (("ssl_cafile", "ca.pem"), ("ssl_certfile", "client.pem"),
                            ("ssl_keyfile", "client.key")):  # fmt: skip
            if field in security:
                security[field] = str(tmp_path / name)
        security.pop("ssl_password", None)  # this key is not encrypted
    config = tmp_path / "service.yaml"
    config.write_text(yaml.safe_dump({"clusters": examples}))
    checked = subprocess.run(
        [sys.executable, "-m", "notifier.cli", "check", "--config", str(config)],
        capture_output=True, text=True, timeout=60, env=os.environ | ENV,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"{config}: OK ({len(examples)} cluster(s))" in checked.stdout
