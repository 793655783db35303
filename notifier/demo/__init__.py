"""demo"""

from notifier.demo.receivers import SLACK_CHANNEL_ID, HttpReceiver, SmtpReceiver
from notifier.demo.run import (
    CHANNELS,
    DETECTION_ALLOWANCE_SCANS,
    REBALANCE_ALLOWANCE_SCANS,
    SCENARIOS,
    SKIPPED_DELETE_RECORDS,
    DemoReport,
    DemoSettings,
    default_rules_path,
    delivery_lines,
    demo_rules,
    format_summary,
    local_notify_config,
    received_events,
    run_demo,
    told_the_whole_story,
)

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
