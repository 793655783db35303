"""``notifier demo``: the whole pipeline, end to end, against scripted consumer groups on an
embedded Kafka broker, with loopback stand-ins for the notification channels.

Modules:

* ``run`` — :func:`run_demo` (broker, service, status page, scripts, shutdown) and ``main``.
* ``settings`` — :class:`DemoSettings` and the bundled rules at demo timings.
* ``story`` — a scenario, its state during a run, and the stages its script moves through.
* ``scenarios`` — the scripted groups (:data:`SCENARIOS`): healthy, lagging, stalled, ...
* ``kafka`` — traffic, consuming and committing, joining in turn, admin requests.
* ``watch`` — the sink that records the service's transitions and notes detections.
* ``receivers`` — loopback HTTP and SMTP servers standing in for Slack, PagerDuty, e-mail.
* ``receiving`` — the notify config for those receivers and what each channel received.
* ``report`` — outcomes, the banner, the summary and delivery tables.
* ``apache_kafka`` — Apache Kafka itself (jars from Maven Central, a single-node KRaft broker,
  Kafka's command-line tools) for the tests, the demo and the benchmarks.

May import ``notifier.api``, ``collect``, ``config``, ``notify``, ``service`` and ``types``.
"""

from notifier.demo.receivers import SLACK_CHANNEL_ID, HttpReceiver, SmtpReceiver
from notifier.demo.receiving import (
    CHANNELS,
    local_notify_config,
    received_events,
    told_the_whole_story,
)
from notifier.demo.report import DemoReport, delivery_lines, format_summary
from notifier.demo.run import run_demo
from notifier.demo.scenarios import (
    REBALANCE_ALLOWANCE_SCANS,
    SCENARIOS,
    SKIPPED_DELETE_RECORDS,
)
from notifier.demo.settings import DemoSettings, default_rules_path, demo_rules
from notifier.demo.story import DETECTION_ALLOWANCE_SCANS

__all__ = [
    "CHANNELS",
    "DETECTION_ALLOWANCE_SCANS",
    "REBALANCE_ALLOWANCE_SCANS",
    "SCENARIOS",
    "SKIPPED_DELETE_RECORDS",
    "SLACK_CHANNEL_ID",
    "DemoReport",
    "DemoSettings",
    "HttpReceiver",
    "SmtpReceiver",
    "default_rules_path",
    "delivery_lines",
    "demo_rules",
    "format_summary",
    "local_notify_config",
    "received_events",
    "run_demo",
    "told_the_whole_story",
]
