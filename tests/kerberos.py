"""A Kerberos realm for the GSSAPI tests: MIT Kerberos' KDC (Debian's krb5-kdc and
krb5-admin-server packages) on a loopback port with its database in a temp directory, the
broker's service key in a keytab for the gate, and the client's key in a client keytab
(``KRB5_CLIENT_KTNAME``), from which MIT Kerberos gets the client's tickets by itself, as a
deployed notifier would.

:class:`GssapiVerifier` is the broker's side of SASL GSSAPI (RFC 4752): the GSS-API context
exchange, then the security-layer negotiation (none offered but "no layer"), then the client's
authorization id.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from notifier.netutil import free_port

from .kafka_gate import Login

REALM = "NOTIFIER.TEST"
BROKER_HOST = "kafka.notifier.test"
"""The host part of the brokers' principal (``kafka/kafka.notifier.test``), given to notifier as
``kerberos.domain_name``: the brokers are reached at 127.0.0.1, which has no principal."""
CLIENT_PRINCIPAL = f"lag-notifier@{REALM}"

KDC_PROGRAMS = ("krb5kdc", "kdb5_util", "kadmin.local")


def kdc_missing() -> str | None:
    """Why no KDC can run here (None: it can)."""
    found = [p for p in KDC_PROGRAMS if shutil.which(p, path="/usr/sbin:/usr/bin:/sbin")]
    if len(found) == len(KDC_PROGRAMS):
        return None
    return "MIT Kerberos' KDC is not installed (Debian: krb5-kdc krb5-admin-server)"


def _program(name: str) -> str:
    found = shutil.which(name, path="/usr/sbin:/usr/bin:/sbin")
    assert found is not None, name
    return found


class Kdc:
    """``with Kdc(directory) as kdc:`` then put ``kdc.environ`` in the environment."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.broker_keytab = directory / "broker.keytab"
        self.client_keytab = directory / "client.keytab"
        self.environ = {
            "KRB5_CONFIG": str(directory / "krb5.conf"),
            "KRB5_KDC_PROFILE": str(directory / "kdc.conf"),
            "KRB5CCNAME": f"FILE:{directory / 'client.ccache'}",
            "KRB5_CLIENT_KTNAME": f"FILE:{self.client_keytab}",
            "KRB5_KTNAME": f"FILE:{self.broker_keytab}",
        }
        self._process: subprocess.Popen[bytes] | None = None

    def _write_config(self) -> None:
        d = self.directory
        d.mkdir(parents=True, exist_ok=True)
        (d / "krb5.conf").write_text(f"""
[libdefaults]
    default_realm = {REALM}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    dns_canonicalize_hostname = false
    rdns = false
    udp_preference_limit = 1
[realms]
    {REALM} = {{
        kdc = 127.0.0.1:{self.port}
    }}
[domain_realm]
    {BROKER_HOST} = {REALM}
""")
        (d / "kdc.conf").write_text(f"""
[kdcdefaults]
    kdc_ports = {self.port}
    kdc_tcp_ports = {self.port}
[realms]
    {REALM} = {{
        database_name = {d / "principal"}
        key_stash_file = {d / "stash"}
        acl_file = {d / "kadm5.acl"}
        supported_enctypes = aes256-cts-hmac-sha1-96:normal
        max_life = 1h
    }}
[logging]
    kdc = FILE:{d / "kdc.log"}
""")
        (d / "kadm5.acl").write_text("")

    def _run(self, *command: str) -> None:
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **self.environ}
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"

    def __enter__(self) -> Kdc:
        self._write_config()
        self._run(_program("kdb5_util"), "create", "-s", "-r", REALM, "-P", "master-0123")
        admin = _program("kadmin.local")
        for principal, keytab in ((f"kafka/{BROKER_HOST}", self.broker_keytab),
                                  (CLIENT_PRINCIPAL, self.client_keytab)):  # fmt: skip
            self._run(admin, "-r", REALM, "-q", f"addprinc -randkey {principal}")
            self._run(admin, "-r", REALM, "-q", f"ktadd -k {keytab} {principal}")
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **self.environ}
        self._process = subprocess.Popen(
            [_program("krb5kdc"), "-n", "-r", REALM], env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                assert self._process.poll() is None, "krb5kdc exited"
                assert time.monotonic() < deadline, "krb5kdc did not listen"
                time.sleep(0.05)

    def __exit__(self, *exc_info: object) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=5)


class GssapiVerifier:
    """One connection's SASL GSSAPI exchange, accepting with the broker's keytab
    (``KRB5_KTNAME``). A new one per connection: the exchange has state."""

    NO_SECURITY_LAYER = 0x01

    def __init__(self) -> None:
        import gssapi

        self._gssapi = gssapi
        credentials = gssapi.Credentials(usage="accept")
        self._context = gssapi.SecurityContext(creds=credentials, usage="accept")
        self._stage = "context"

    def __call__(self, auth_bytes: bytes) -> Login:
        context = self._context
        try:
            if self._stage == "context":
                token = context.step(auth_bytes) or b""
                if not context.complete:
                    return Login(challenge=token)
                if token:  # mutual authentication: the client answers with an empty token
                    self._stage = "layer"
                    return Login(challenge=token)
                self._stage = "layer"
                auth_bytes = b""
            if self._stage == "layer":
                self._stage = "confirm"
                offer = bytes([self.NO_SECURITY_LAYER]) + (65536).to_bytes(3, "big")
                return Login(challenge=context.wrap(offer, False).message)
            answer = context.unwrap(auth_bytes).message
        except self._gssapi.exceptions.GSSError as exc:
            return Login(error=f"GSSAPI: {exc.gen_message()}")
        if not answer or answer[0] != self.NO_SECURITY_LAYER:
            return Login(error="GSSAPI: the client asked for a security layer")
        return Login(principal=str(context.initiator_name))
