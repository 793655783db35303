"""The demo's notification wiring, without Kafka: the local receivers the demo starts, the
notify config it gives them, and how it reads back what each channel received."""

from __future__ import annotations

import asyncio
import time

from notifier.config import parse_notify
from notifier.demo import (
    CHANNELS,
    HttpReceiver,
    SmtpReceiver,
    delivery_lines,
    local_notify_config,
    received_events,
    told_the_whole_story,
)
from notifier.notify import Notifier
from notifier.types import GroupStatus

from .notify_helpers import move

OK, WARN, ERR = GroupStatus.OK, GroupStatus.WARN, GroupStatus.ERR


def test_the_whole_story_is_an_open_then_an_escalation_then_a_resolve():
    assert told_the_whole_story(["open", "escalate", "resolve"])
    assert told_the_whole_story(["open", "repeat", "escalate", "repeat", "resolve"])
    assert not told_the_whole_story(["open", "resolve"])
    assert not told_the_whole_story(["escalate", "open", "resolve"])
    assert not told_the_whole_story([])


async def test_every_local_channel_receives_the_open_escalation_and_resolve(tmp_path):
    async with HttpReceiver() as http, SmtpReceiver() as smtp:
        notifier = Notifier(parse_notify(local_notify_config(http, smtp), "demo"), tmp_path / "n")
        await notifier.start()
        at = int(time.time() * 1000)
        steps = [(OK, WARN), (WARN, ERR), (ERR, OK)]
        for offset, (before, after) in enumerate(steps):
            notifier.handle([move("demo-stalled", before, after, at + offset)], at + offset)
            assert await notifier.wait_delivered(10)
            await asyncio.sleep(1.1)  # the demo route's group_interval: one message per step
        await notifier.stop()
        received = received_events(http, smtp, ["demo-stalled", "demo-healthy"])

    assert received["demo-stalled"] == {c: ["open", "escalate", "resolve"] for c in CHANNELS}
    assert received["demo-healthy"] == {c: [] for c in CHANNELS}
    table = delivery_lines(received)
    assert table[0].split() == ["group", *CHANNELS]
    assert table[1].split() == ["demo-stalled", *["open→escalate→resolve"] * 4]
    assert table[2].split() == ["demo-healthy", "-", "-", "-", "-"]
