"""What operators deploy: the Grafana dashboards in examples/grafana (valid JSON, every query on
a family /metrics exports, with labels it has), the Helm chart in examples/helm (rendered and
parsed; probes, config, rules, Secret references, Service and ServiceMonitor agree with each
other and with the service's config), and the image's HEALTHCHECK run against a real server."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

import notifier.api.server
from notifier.api import ApiServer, create_app
from notifier.api.metrics import BY_NAME
from notifier.config import parse_service_config
from notifier.netutil import free_port
from notifier.rules import RulesConfig, parse_rules

from .scripted import service

ROOT = Path(__file__).resolve().parents[1]
GRAFANA = ROOT / "examples" / "grafana"
CHART = ROOT / "examples" / "helm" / "notifier"

# ---------------------------------------------------------------------------------- Grafana

_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
             "or", "unless", "offset", "vector", "inf", "nan"}  # fmt: skip
_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def promql_selectors(expr: str) -> list[tuple[str, set[str]]]:
    """Each metric a PromQL expression selects, with the label names it matches on or groups
    by. Enough of PromQL for dashboards: selectors, functions, aggregations, ranges."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)
    found: list[tuple[str, set[str]]] = []
    grouping = {m.group(2) for m in re.finditer(r"\b(by|without|on|ignoring)\s*\(([^)]*)\)", expr)}
    grouped = {label.strip() for labels in grouping for label in labels.split(",") if label}
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    position = 0
    while match := _IDENT.search(expr, position):
        name, position = match.group(), match.end()
        rest = expr[position:].lstrip()
        if rest.startswith("(") or name in _KEYWORDS or name.startswith("$"):
            continue
        if expr[match.start() - 1 : match.start()] == "$":
            continue
        labels: set[str] = set()
        if rest.startswith("{"):
            body = rest[1 : rest.index("}")]
            labels = {m.group(1) for m in re.finditer(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*[=!]", body)}
            position = expr.index("}", position) + 1
        found.append((name, labels | grouped))
    return found


def test_the_promql_reader_finds_metrics_and_labels():
    assert promql_selectors('topk(10, sum by (topic) (a_b{x="1",y=~"$v"}[5m])) or vector(0)') == [
        ("a_b", {"x", "y", "topic"})
    ]
    assert promql_selectors("rate(c_total[$__rate_interval]) * 60") == [("c_total", set())]


def _expressions(dashboard: dict) -> list[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs += [a["expr"] for a in dashboard["annotations"]["list"] if "expr" in a]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            inner = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", variable["query"]["query"])
            assert inner, variable
            exprs.append(inner.group(1))
            assert inner.group(2) in BY_NAME[promql_selectors(inner.group(1))[0][0]].labels
    return exprs


@pytest.mark.parametrize("path", sorted(GRAFANA.glob("*.json")), ids=lambda p: p.name)
def test_every_dashboard_query_reads_a_family_the_service_exports(path):
    dashboard = json.loads(path.read_text())
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    names = {v["name"] for v in dashboard["templating"]["list"]}
    assert "datasource" in names
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
    for expr in _expressions(dashboard):
        selectors = promql_selectors(expr)
        assert selectors, expr
        for metric, labels in selectors:
            assert metric in BY_NAME, f"{path.name}: {metric} is not exported ({expr})"
            assert labels <= set(BY_NAME[metric].labels), f"{path.name}: {expr}"
        for variable in re.findall(r"\$(\w+)", expr):
            assert variable in names or variable.startswith("__"), expr


def test_the_group_dashboard_shows_lag_lag_seconds_status_and_incidents():
    dashboard = json.loads((GRAFANA / "consumer-group.json").read_text())
    titles = {p["title"] for p in dashboard["panels"]}
    assert {"Status", "Lag", "Lag in seconds", "Lag per partition"} <= titles
    (incidents,) = [a for a in dashboard["annotations"]["list"] if a["name"] == "Incidents"]
    assert incidents["expr"].startswith("notifier_incident_open{")
    fleet = json.loads((GRAFANA / "fleet-overview.json").read_text())
    links = json.dumps(fleet["panels"])
    assert f"/d/{dashboard['uid']}/" in links  # a group in the fleet table opens its dashboard


# ------------------------------------------------------------------------------------ Helm


class GoTemplate:
    """The part of Go templates and Helm's functions the chart uses: ``{{ pipeline }}`` with
    ``-`` trimming, ``if``/``else``/``with``/``range``/``end``, ``$``, paths from dot, and
    toYaml, nindent, indent, quote, default, print, sha256sum."""

    def __init__(self, text: str):
        self.parts: list[tuple[str, str]] = []
        position = 0
        for match in re.finditer(r"\{\{(-?)\s*(.*?)\s*(-?)\}\}", text, re.S):
            before = text[position : match.start()]
            if match.group(1):
                before = before.rstrip()
            if self.parts and self.parts[-1][0] == "trim":
                before = before.lstrip()
                self.parts.pop()
            self.parts.append(("text", before))
            self.parts.append(("action", match.group(2)))
            if match.group(3):
                self.parts.append(("trim", ""))
            position = match.end()
        after = text[position:]
        if self.parts and self.parts[-1][0] == "trim":
            after = after.lstrip()
            self.parts.pop()
        self.parts.append(("text", after))

    def render(self, root: dict) -> str:
        out, index = self._block(0, root, root)
        assert index == len(self.parts), "unbalanced {{ end }}"
        return out

    def _block(self, index: int, dot: Any, root: dict, skip: bool = False) -> tuple[str, int]:
        out: list[str] = []
        while index < len(self.parts):
            kind, body = self.parts[index]
            index += 1
            if kind == "text":
                out.append("" if skip else body)
                continue
            word = body.split(None, 1)[0]
            if word in ("end", "else"):
                return "".join(out), index - 1
            if word in ("if", "with", "range"):
                value = None if skip else self._pipeline(body.split(None, 1)[1], dot, root)
                items: list[Any] = [None]
                if word == "range":
                    items = list(value or [None])
                outs = []
                end = index
                for item in items:
                    inner_dot = {"if": dot, "with": value, "range": item}[word]
                    taken = not skip and bool(value)
                    text, end = self._block(index, inner_dot, root, skip=not taken)
                    outs.append(text)
                if self.parts[end][1] == "else":
                    text, end = self._block(end + 1, dot, root, skip=skip or bool(value))
                    outs.append(text)
                assert self.parts[end][1] == "end", body
                out.append("".join(outs))
                index = end + 1
                continue
            if not skip:
                out.append(_text(self._pipeline(body, dot, root)))
        return "".join(out), index

    def _pipeline(self, text: str, dot: Any, root: dict) -> Any:
        value: Any = _MISSING
        for command in _split(text, "|"):
            args = _split(command, " ")
            extra = [] if value is _MISSING else [value]
            if args[0] in _FUNCTIONS:
                value = _FUNCTIONS[args[0]](*[self._operand(a, dot, root) for a in args[1:]],
                                            *extra)  # fmt: skip
            else:
                assert len(args) == 1 and not extra, command
                value = self._operand(args[0], dot, root)
        return value

    def _operand(self, token: str, dot: Any, root: dict) -> Any:
        if token.startswith("("):
            return self._pipeline(token[1:-1], dot, root)
        if token.startswith('"'):
            return json.loads(token)
        if re.fullmatch(r"-?\d+", token):
            return int(token)
        value = root if token.startswith("$") else dot
        for key in token.lstrip("$").split("."):
            if key:
                value = value.get(key) if isinstance(value, dict) else None
        return value


_MISSING = object()


def _split(text: str, separator: str) -> list[str]:
    parts, depth, quoted, current = [], 0, False, ""
    for char in text:
        if char == '"':
            quoted = not quoted
        elif not quoted and char in "()":
            depth += 1 if char == "(" else -1
        if char == separator and depth == 0 and not quoted:
            if current.strip():
                parts.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current.strip())
    return parts


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _to_yaml(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=False, sort_keys=False).rstrip("\n")


_FUNCTIONS = {
    "toYaml": _to_yaml,
    "nindent": lambda n, s: "\n" + "\n".join(" " * n + line for line in _text(s).split("\n")),
    "indent": lambda n, s: "\n".join(" " * n + line for line in _text(s).split("\n")),
    "quote": lambda s: json.dumps(_text(s)),
    "default": lambda fallback, value: value if value else fallback,
    "print": lambda *parts: "".join(_text(p) for p in parts),
    "sha256sum": lambda s: hashlib.sha256(_text(s).encode()).hexdigest(),
}


def render_chart(**overrides: Any) -> dict[str, dict]:
    """The chart's manifests by kind, rendered as `helm template` would with ``overrides``
    merged into values.yaml."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    values.update(overrides)
    return render_values(values)


def render_values(values: dict) -> dict[str, dict]:
    """The chart's manifests by kind, rendered with ``values`` (all of them)."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    root = {"Values": values, "Release": {"Name": "lag", "Namespace": "monitoring"},
            "Chart": {"Name": chart["name"], "AppVersion": chart["appVersion"]}}  # fmt: skip
    manifests: dict[str, dict] = {}
    for template in sorted((CHART / "templates").glob("*.yaml")):
        text = GoTemplate(template.read_text()).render(root)
        for document in yaml.safe_load_all(text):
            if document:
                assert document["kind"] not in manifests
                manifests[document["kind"]] = document
    return manifests


def test_the_go_template_subset_renders_like_helm():
    text = (
        "{{- if .a }}a: {{ .a | quote }}{{ else }}none{{ end }}\n{{- range .l }} {{ .n }}{{- end }}"
    )
    assert GoTemplate(text).render({"a": "x", "l": [{"n": 1}, {"n": 2}]}) == 'a: "x" 1 2'
    assert GoTemplate(text).render({"a": "", "l": []}) == "none"
    assert GoTemplate("{{ toYaml .m | nindent 2 }}").render({"m": {"k": [1]}}) == "\n  k:\n  - 1"


def test_the_chart_runs_the_image_with_its_config_probes_and_secret_references():
    manifests = render_chart()
    assert set(manifests) == {"ConfigMap", "Deployment", "Service", "ServiceMonitor",
                              "PersistentVolumeClaim"}  # fmt: skip
    deployment = manifests["Deployment"]
    pod = deployment["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert container["args"] == ["--config", "/etc/notifier/config.yaml"]
    assert container["image"] == "notifier:0.1.0"
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert pod["spec"]["securityContext"]["runAsUser"] == 10001  # the image's user
    assert (
        deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"
    )

    config_text = manifests["ConfigMap"]["data"]["config.yaml"]
    secret_env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]}
    assert secret_env["SLACK_WEBHOOK_URL"] == {
        "name": "notifier-secrets",
        "key": "slack-webhook-url",
        "optional": False,
    }
    assert secret_env["NOTIFIER_API_TOKEN"]["optional"] is True
    assert "hooks.slack.com" not in json.dumps(manifests)  # credentials only by reference
    used = set(re.findall(r"\$\{(\w+)", config_text))
    assert used <= set(secret_env), used - set(secret_env)
    environ = {"SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/x"}
    config = parse_service_config(yaml.safe_load(config_text), "config.yaml", environ)
    assert config.api.host == "0.0.0.0" and config.data_dir == "/data"
    assert config.metrics.families == ["burrow", "kafka_exporter", "kafka_lag_exporter"]
    (port,) = container["ports"]
    assert port == {"name": "http", "containerPort": config.api.port}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/etc/notifier/config.yaml"]["subPath"] == "config.yaml"
    assert "/etc/notifier/rules.yaml" not in mounts  # the image's default rules
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == manifests["ConfigMap"]["metadata"]["name"]
    claim = manifests["PersistentVolumeClaim"]["metadata"]["name"]
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == claim
    assert mounts["/data"]["name"] == "data"


def test_the_service_and_servicemonitor_reach_the_pods_metrics():
    manifests = render_chart()
    labels = manifests["Deployment"]["spec"]["template"]["metadata"]["labels"]
    svc = manifests["Service"]
    assert svc["spec"]["selector"].items() <= labels.items()
    assert svc["spec"]["publishNotReadyAddresses"] is True  # the status page during an outage
    (port,) = svc["spec"]["ports"]
    assert port["targetPort"] == "http"
    monitor = manifests["ServiceMonitor"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"]) == (port["name"], "/metrics")


def test_rules_given_to_the_chart_are_mounted_and_roll_the_pod():
    rules = (ROOT / "rules.yaml").read_text()
    plain, custom = render_chart(), render_chart(rules=rules)
    assert parse_rules(yaml.safe_load(custom["ConfigMap"]["data"]["rules.yaml"]), "rules.yaml")
    (container,) = custom["Deployment"]["spec"]["template"]["spec"]["containers"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/etc/notifier/rules.yaml"]["subPath"] == "rules.yaml"

    def checksum(manifests: dict) -> str:
        return manifests["Deployment"]["spec"]["template"]["metadata"]["annotations"][
            "checksum/config"
        ]

    assert checksum(plain) != checksum(custom)


def test_without_the_operator_or_a_volume_the_chart_leaves_them_out():
    manifests = render_chart(serviceMonitor={"enabled": False},
                             persistence={"enabled": False, "size": "1Gi"})  # fmt: skip
    assert "ServiceMonitor" not in manifests and "PersistentVolumeClaim" not in manifests
    volumes = {v["name"]: v for v in manifests["Deployment"]["spec"]["template"]["spec"]["volumes"]}
    assert volumes["data"] == {"name": "data", "emptyDir": {}}


def readme_helm_install() -> list[str]:
    """The `helm install` command of the README's Kubernetes section, as its shell splits it."""
    section = (ROOT / "README.md").read_text().split("## Deploying on Kubernetes", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    joined = block.group(1).replace("\\\n", " ")
    (line,) = [ln for ln in joined.splitlines() if ln.startswith("helm install ")]
    return shlex.split(line, comments=True)


def _path(key: str) -> list[str | int]:
    """Helm's ``--set`` key: names separated by dots, ``[i]`` list indexes."""
    return [int(part[1:-1]) if part.startswith("[") else part
            for part in re.findall(r"\[\d+\]|[^.\[\]]+", key)]  # fmt: skip


def _assign(tree: Any, path: list[str | int], value: Any) -> Any:
    """``value`` at ``path`` in an override tree as Helm's strvals builds it: an index makes a
    list of that length (what is before it empty), never a copy of the chart's list."""
    head, rest = path[0], path[1:]
    if isinstance(head, int):
        items = tree if isinstance(tree, list) else []
        items += [None] * (head + 1 - len(items))
        items[head] = _assign(items[head], rest, value) if rest else value
        return items
    node = tree if isinstance(tree, dict) else {}
    node[head] = _assign(node.get(head), rest, value) if rest else value
    return node


def _coalesce(base: Any, override: Any) -> Any:
    """Helm's merge of given values over the chart's: maps merge key by key, anything else
    (lists included) is replaced whole."""
    if isinstance(base, dict) and isinstance(override, dict):
        return {**base, **{k: _coalesce(base.get(k), v) for k, v in override.items()}}
    return override


def _scalar(text: str) -> Any:
    """A ``--set`` value as Helm types it: true/false, integers, else the string."""
    if text in ("true", "false"):
        return text == "true"
    return int(text) if re.fullmatch(r"-?\d+", text) else text


def helm_values(args: list[str], cwd: Path) -> dict:
    """values.yaml with the command's ``--set``, ``--set-json`` and ``--set-file`` applied."""
    overrides: dict = {}
    rest = iter(args)
    for arg in rest:
        if arg not in ("--set", "--set-json", "--set-file"):
            continue
        key, _, raw = next(rest).partition("=")
        value = {"--set": _scalar, "--set-json": json.loads,
                 "--set-file": lambda name: (cwd / name).read_text()}[arg](raw)  # fmt: skip
        overrides = _assign(overrides, _path(key), value)
    return _coalesce(yaml.safe_load((CHART / "values.yaml").read_text()), overrides)


def _notifier_check(config_text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    (tmp_path / "config.yaml").write_text(config_text)
    environ = os.environ | {"SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/x"}
    return subprocess.run(
        [sys.executable, "-m", "notifier.cli", "check", "--config", str(tmp_path / "config.yaml")],
        capture_output=True, text=True, timeout=120, env=environ, cwd=tmp_path,
    )  # fmt: skip


def test_the_readmes_helm_command_yields_a_config_notifier_check_accepts(tmp_path):
    command = readme_helm_install()
    assert command[:4] == ["helm", "install", "lag", "examples/helm/notifier"]
    (tmp_path / "rules.yaml").write_text((ROOT / "rules.yaml").read_text())
    manifests = render_values(helm_values(command[4:], tmp_path))
    config_text = manifests["ConfigMap"]["data"]["config.yaml"]
    config = yaml.safe_load(config_text)
    assert config["clusters"] == [{"name": "prod", "bootstrap_servers": "kafka-bootstrap:9092"}]
    checked = _notifier_check(config_text, tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    (container,) = manifests["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert container["image"].startswith("registry.example.com/notifier:")
    assert "rules.yaml" in manifests["ConfigMap"]["data"]

    helm = shutil.which("helm")
    if helm is not None:  # the real thing agrees with the emulation
        rendered = subprocess.run([helm, "template", "lag", str(CHART), *command[4:]],
                                  capture_output=True, text=True, timeout=120, cwd=tmp_path,
                                  check=True).stdout  # fmt: skip
        by_kind = {d["kind"]: d for d in yaml.safe_load_all(rendered) if d}
        assert yaml.safe_load(by_kind["ConfigMap"]["data"]["config.yaml"]) == config


def test_the_command_the_readme_gave_before_yields_a_config_without_a_cluster_name(tmp_path):
    """Why the README gives the clusters whole: ``--set`` on one field of a list entry
    replaces the chart's list with an entry holding only that field."""
    values = helm_values(["--set", "config.clusters[0].bootstrap_servers=kafka:9092"], tmp_path)
    assert values["config"]["clusters"] == [{"bootstrap_servers": "kafka:9092"}]
    config_text = render_values(values)["ConfigMap"]["data"]["config.yaml"]
    checked = _notifier_check(config_text, tmp_path)
    assert checked.returncode == 1
    assert "clusters[0].name" in checked.stdout + checked.stderr


def test_with_api_tls_the_probes_and_the_servicemonitor_speak_https():
    plain = render_chart()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    values["config"]["api"]["tls"] = {"cert_file": "/etc/notifier/tls/tls.crt",
                                      "key_file": "/etc/notifier/tls/tls.key"}  # fmt: skip
    values["apiTlsSecret"] = "notifier-api-tls"
    values["serviceMonitor"]["tlsConfig"] = {"insecureSkipVerify": True}
    secure = render_values(values)
    for manifests, scheme in ((plain, "HTTP"), (secure, "HTTPS")):
        (container,) = manifests["Deployment"]["spec"]["template"]["spec"]["containers"]
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            assert container[probe]["httpGet"].get("scheme", "HTTP") == scheme, probe
        (endpoint,) = manifests["ServiceMonitor"]["spec"]["endpoints"]
        assert endpoint.get("scheme", "http") == scheme.lower()
    pod = secure["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/etc/notifier/tls"]["name"] == "api-tls"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["api-tls"]["secret"]["secretName"] == "notifier-api-tls"
    (endpoint,) = secure["ServiceMonitor"]["spec"]["endpoints"]
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}
    config = yaml.safe_load(secure["ConfigMap"]["data"]["config.yaml"])
    parsed = parse_service_config(config, "config.yaml", {"SLACK_WEBHOOK_URL": "https://h/x"})
    assert parsed.api.tls is not None and parsed.api.tls.cert_file.startswith("/etc/notifier/tls")
    assert "api-tls" not in {v["name"] for v in plain["Deployment"]["spec"]["template"]["spec"]
                             ["volumes"]}  # fmt: skip


@pytest.mark.skipif(shutil.which("helm") is None, reason="helm is not installed")
def test_helm_lints_the_chart():
    linted = subprocess.run(["helm", "lint", str(CHART)], capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    assert linted.returncode == 0, linted.stdout + linted.stderr


# ------------------------------------------------------------------------ Kubernetes fleet

KUBERNETES = ROOT / "examples" / "kubernetes"


def kubernetes_manifests() -> dict[str, dict]:
    """examples/kubernetes/*.yaml by kind, as `kubectl apply -f` would read them."""
    manifests: dict[str, dict] = {}
    for path in sorted(KUBERNETES.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document:
                assert document["kind"] not in manifests, path.name
                manifests[document["kind"]] = document
    return manifests


def test_the_kubernetes_fleet_runs_three_pods_of_the_image_on_one_coordinated_config():
    manifests = kubernetes_manifests()
    assert set(manifests) == {"ConfigMap", "Deployment", "Service", "PodDisruptionBudget"}
    deployment = manifests["Deployment"]
    pod = deployment["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert deployment["spec"]["replicas"] == 3
    # Shards move one pod at a time: a new pod joins before an old one leaves.
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert container["args"] == ["--config", "/etc/notifier/config.yaml"]  # the image's CMD
    assert container["image"].startswith("notifier:")
    assert pod["spec"]["securityContext"]["runAsUser"] == 10001  # the image's user
    assert pod["spec"]["terminationGracePeriodSeconds"] >= 30  # time to hand shards over

    config_text = manifests["ConfigMap"]["data"]["config.yaml"]
    secret_env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]}
    used = set(re.findall(r"\$\{(\w+)", config_text))
    assert used <= set(secret_env), used - set(secret_env)
    assert "hooks.slack.com" not in json.dumps(manifests)  # credentials only by reference
    environ = {"SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/x"}
    config = parse_service_config(yaml.safe_load(config_text), "config.yaml", environ)
    coordination = config.coordination
    assert coordination is not None
    assert coordination.cluster in {c.name for c in config.clusters}
    assert coordination.partitions >= 2 * deployment["spec"]["replicas"]  # room to spread
    assert coordination.heartbeat_interval < coordination.session_timeout
    assert coordination.instance is None  # each pod is its $HOSTNAME: the pod's name
    assert config.api.host == "0.0.0.0" and config.data_dir == "/data"

    (port,) = container["ports"]
    assert port == {"name": "http", "containerPort": config.api.port}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/etc/notifier/config.yaml"]["subPath"] == "config.yaml"
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == manifests["ConfigMap"]["metadata"]["name"]
    assert volumes[mounts["/data"]["name"]] == {"name": "data", "emptyDir": {}}


def test_the_kubernetes_service_and_budget_select_the_fleets_pods():
    manifests = kubernetes_manifests()
    deployment = manifests["Deployment"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service_spec = manifests["Service"]["spec"]
    assert service_spec["selector"].items() <= labels.items()
    (port,) = service_spec["ports"]
    assert port["targetPort"] == "http"
    budget = manifests["PodDisruptionBudget"]
    assert budget["apiVersion"] == "policy/v1"
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    # A drain takes at most one pod: the others keep watching while its shards move.
    assert budget["spec"]["maxUnavailable"] == 1 < deployment["spec"]["replicas"]


# ------------------------------------------------------------------------------ HEALTHCHECK


def _healthcheck() -> tuple[list[str], dict[str, str]]:
    """The Dockerfile's HEALTHCHECK command (exec form) and the ENV it relies on."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    (line,) = [row for row in text.splitlines() if row.startswith("HEALTHCHECK")]
    command = json.loads(line[line.index("CMD") + 3 :])
    env = dict(re.findall(r"^ENV (\w+)=(\S+)$", text, re.M))
    return command, env


def test_the_image_healthcheck_needs_only_python_and_asks_healthz():
    command, env = _healthcheck()
    assert command[0] == "python"  # in python:3.11-slim; curl and wget are not
    assert env["NOTIFIER_HEALTHCHECK_URL"] == "http://127.0.0.1:8000/healthz"
    docker = yaml.safe_load((ROOT / "examples" / "docker.yaml").read_text())
    assert docker["api"]["port"] == 8000


async def test_the_healthcheck_passes_on_a_serving_api_and_fails_without_one(tmp_path):
    command, _ = _healthcheck()
    coord, _ = service(tmp_path, [], RulesConfig())
    server = ApiServer(create_app(coord), "127.0.0.1", 0)
    await server.start()
    try:
        url = f"http://127.0.0.1:{server.port}/healthz"
        ok = await _run([sys.executable, *command[1:]], url)
        down = await _run([sys.executable, *command[1:]], f"http://127.0.0.1:{free_port()}/")
        missing = await _run([sys.executable, *command[1:]], f"{url}/nope")
    finally:
        await server.stop()
    assert ok == 0
    assert down != 0 and missing != 0


async def test_an_idle_api_server_dates_its_answers_and_stops_when_told(tmp_path, monkeypatch):
    # It wakes once a tick to refresh its Date header; a stop must not wait for the next one.
    monkeypatch.setattr(notifier.api.server, "TICK_S", 3600.0)
    coord, _ = service(tmp_path, [], RulesConfig())
    server = ApiServer(create_app(coord), "127.0.0.1", 0)
    await server.start()
    try:
        async with httpx.AsyncClient() as http:
            answer = await http.get(f"http://127.0.0.1:{server.port}/healthz")
    finally:
        await asyncio.wait_for(server.stop(), 30)
    dated = parsedate_to_datetime(answer.headers["date"]).timestamp()
    assert abs(dated - time.time()) < 60


async def _run(command: list[str], url: str) -> int:
    process = await asyncio.create_subprocess_exec(
        *command, env={**os.environ, "NOTIFIER_HEALTHCHECK_URL": url},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    return await asyncio.wait_for(process.wait(), 30)
