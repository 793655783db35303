"""Notifications (with incidents, results and partitions) round-trip through plain JSON."""

from __future__ import annotations

import json

from notifier.notify import notification_from_dict, notification_to_dict

from .notify_helpers import full_notification


def test_a_notification_round_trips_through_json():
    original = full_notification()
    data = json.loads(json.dumps(notification_to_dict(original)))
    restored = notification_from_dict(data)

    assert restored == original
    assert restored.alerts[0].result.max_lag is restored.alerts[0].result.partitions[1]
