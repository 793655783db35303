"""The demo's stories on Apache Kafka, with Burrow 1.2.1 (Debian's package) watching the same
broker beside the service, and ``notifier demo --kafka``'s choice of broker.

The stories run once, on the session's Kafka 3.9 broker (Burrow 1.2 cannot talk to Kafka 4):
every scenario must be detected and nothing healthy must alert, retention loss included (a real
broker deletes records; the embedded one cannot, so there it is skipped). Burrow's own verdicts
are recorded, not asserted: they are what benchmarks/vs_burrow.py compares with, and the README
shows its table.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from notifier.cli import main as cli
from notifier.demo import DemoSettings
from notifier.demo.run import apache_kafka_broker
from notifier.embedded.apache_kafka import ApacheKafkaBroker

from .burrow import BurrowSettings, BurrowStatus, burrow_missing, format_table, side_by_side

pytestmark = pytest.mark.kafka

DEMO_SCAN_S = 2.0


@pytest.fixture(scope="module")
def burrow_available() -> None:
    missing = burrow_missing()
    if missing is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"Burrow is needed in CI: {missing}", pytrace=False)
    pytest.skip(missing)


@pytest.mark.slow
async def test_every_story_on_apache_kafka_with_burrow_beside(
    apache_kafka_3: ApacheKafkaBroker, burrow_available: None, tmp_path: Path
) -> None:
    settings = DemoSettings(
        duration=180,  # at most: the run ends once every scenario has told its story
        data_dir=tmp_path / "demo",
        scan_interval=DEMO_SCAN_S,
        prefix=f"bb{uuid.uuid4().hex[:6]}",
    )
    report, rows = await side_by_side(
        apache_kafka_3.bootstrap_servers,
        settings,
        BurrowSettings(intervals=settings.intervals, offset_refresh=int(DEMO_SCAN_S)),
        tmp_path,
    )
    table = format_table(rows)
    assert report.ok, [(o.name, o.detected) for o in report.outcomes]
    retention = report.outcome("retention-loss")
    assert retention.skipped is None, "a real broker deletes records: nothing to skip"
    assert "retention-risk" in retention.detected
    by_scenario = {row["scenario"]: row for row in rows}
    assert by_scenario["healthy"]["notifier_false_alarms"] == 0, table
    # Burrow watched the same groups the whole time: it was asked about each of them at every
    # poll, and it knew them (a group it had never seen would be NOTFOUND throughout).
    for row in rows:
        assert row["burrow_polls"] > 10, table
    assert all(row["burrow_worst"] != "NOTFOUND" for row in rows), table


def test_burrow_status_names_the_worst_of_group_and_partitions() -> None:
    stalled = BurrowStatus("ERR", 1.0, ("STALL",), 120)
    assert stalled.alerting and stalled.described == "ERR (STALL)" and stalled.rank == 2
    quiet = BurrowStatus("OK", 1.0, (), 0)
    assert not quiet.alerting and quiet.described == "OK" and quiet.rank == 0


def test_demo_kafka_takes_a_folder_of_jars_or_a_version(tmp_path: Path) -> None:
    jars = tmp_path / "kafka_2.13-3.9.2" / "libs"
    jars.mkdir(parents=True)
    (jars / "kafka_2.13-3.9.2.jar").touch()
    download = apache_kafka_broker(str(jars.parent), tmp_path / "a")
    assert (download.version, download.jars) == ("3.9.2", jars)
    assert apache_kafka_broker(str(jars), tmp_path / "b").version == "3.9.2"
    assert apache_kafka_broker("4.4.0", tmp_path / "c").version == "4.4.0"


def test_demo_kafka_refuses_a_folder_without_kafka_and_says_which(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["demo", "--kafka", str(tmp_path), "--duration", "5"])
    assert result.exit_code == 2
    assert f"--kafka {tmp_path}: no kafka_2.13-<version>.jar in {tmp_path}" in result.output
