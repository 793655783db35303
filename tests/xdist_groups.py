"""Which tests share a pytest-xdist worker, for `make test` (``pytest -n 2 --dist loadgroup``).

Each worker is a process with its own session fixtures. The tests of each shared resource (the
session's Apache Kafka brokers, the secured broker of tests/test_kafka_logins.py, Spark) run on
one worker, so that each starts once per run; every other module runs whole on one worker, so
that its module-scoped fixtures (the story runs, the recordings) start once too.

xdist's own ``xdist_group`` marks do not group anything with pytest 9.2 (xdist 3.8 renames the
items' ``_nodeid``, which pytest 9.2 no longer reads), so the workers write each test's group
to a file the controller names, and :class:`ResourceGroupScheduling` reads it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadGroupScheduling

SHARED_RESOURCES = {
    "apache_kafka": "apache-kafka",
    "apache_kafka_3": "apache-kafka",
    "any_apache_kafka": "apache-kafka",
    "secured_kafka": "kafka-logins",
    "spark": "spark",
}
"""Session fixtures that start something slow, and the group of the tests that use them."""
LONG_MARKERS = ("kafka", "slow", "spark")
"""A module with a test marked so runs for a minute or more."""
_GROUPS_FILE = "notifier_xdist_groups"
_REPEAT = "\x00repeat-"
"""Joins a repeated node id and its occurrence (a character no node id holds)."""


def groups_of(items: list[pytest.Item]) -> dict[str, str]:
    """Each test's group: the shared resources its module's tests need, else its module."""
    needs: dict[str, set[str]] = {}
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        needs.setdefault(_module(item), set()).update(
            SHARED_RESOURCES[name] for name in fixtures if name in SHARED_RESOURCES
        )
    return {item.nodeid: "+".join(sorted(needs[_module(item)])) or _module(item) for item in items}


def long_first(items: list[pytest.Item]) -> None:
    """Put the modules that run for a minute or more first (keeping each module's order): a
    worker that took one last would run on alone at the end."""
    groups = groups_of(items)
    long_groups = {
        groups[item.nodeid]
        for item in items
        if any(item.get_closest_marker(marker) for marker in LONG_MARKERS)
        or any(name in SHARED_RESOURCES for name in getattr(item, "fixturenames", ()))
    }
    items.sort(key=lambda item: groups[item.nodeid] not in long_groups)


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


class ResourceGroupScheduling(LoadGroupScheduling):
    """``--dist loadgroup`` with the groups the workers wrote (see the module's docstring);
    the work units go out in collection order (``--no-loadscope-reorder``): long ones first.

    Tests that share a node id (schemathesis makes one per API operation of
    tests/test_api.py's generated-request test) each keep a key of their own: xdist's scope
    schedulers key work by node id and would run only the first of them."""

    def __init__(self, config: pytest.Config, groups_dir: Path, log: Any = None) -> None:
        super().__init__(config, log)
        self._groups_dir = groups_dir
        self._groups: dict[str, str] | None = None

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        seen: Counter[str] = Counter()
        keys = []
        for nodeid in collection:
            seen[nodeid] += 1
            keys.append(nodeid if seen[nodeid] == 1 else f"{nodeid}{_REPEAT}{seen[nodeid]}")
        super().add_node_collection(node, keys)

    def _split_scope(self, nodeid: str) -> str:
        nodeid = nodeid.split(_REPEAT, 1)[0]
        if self._groups is None:
            self._groups = {}
            for written in sorted(self._groups_dir.glob("*.json")):
                self._groups.update(json.loads(written.read_text()))
        return self._groups.get(nodeid) or super()._split_scope(nodeid)


class XdistGroups:
    """The plugin: registered by tests/conftest.py where pytest-xdist is installed."""

    def __init__(self) -> None:
        self._groups_dir: Path | None = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        workerinput = getattr(config, "workerinput", None)
        if workerinput is None or _GROUPS_FILE not in workerinput:
            return  # not distributed: the order of a plain run stays
        long_first(items)
        target = Path(workerinput[_GROUPS_FILE]) / f"{workerinput['workerid']}.json"
        partial = target.with_suffix(".part")
        partial.write_text(json.dumps(groups_of(items)))
        os.replace(partial, target)

    def pytest_configure_node(self, node: Any) -> None:
        if self._groups_dir is None:
            self._groups_dir = Path(tempfile.mkdtemp(prefix="notifier-xdist-groups-"))
        node.workerinput[_GROUPS_FILE] = str(self._groups_dir)

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if config.getvalue("dist") != "loadgroup" or self._groups_dir is None:
            return None
        return ResourceGroupScheduling(config, self._groups_dir, log)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self._groups_dir is not None:
            shutil.rmtree(self._groups_dir, ignore_errors=True)
