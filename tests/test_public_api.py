"""``notifier`` names its public API: every name in ``__all__`` is there, and importing the
package (which the command line does first) loads none of the stages until one is used."""

from __future__ import annotations

import subprocess
import sys

import notifier
from notifier.api import create_app
from notifier.history import read_history
from notifier.types import GroupStatus


def test_every_public_name_resolves_to_the_object_its_package_exports():
    assert notifier.__all__ == sorted(notifier.__all__, key=lambda n: (not n.isupper(), n))
    for name in notifier.__all__:
        assert getattr(notifier, name) is not None, name
    assert notifier.create_app is create_app
    assert notifier.read_history is read_history
    assert notifier.GroupStatus is GroupStatus
    assert set(notifier.__all__) <= set(dir(notifier))


def test_an_unknown_name_is_an_attribute_error_naming_it():
    try:
        notifier.no_such_thing  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:
        raise AssertionError("notifier.no_such_thing resolved")


def test_importing_the_package_loads_no_stage():
    code = (
        "import sys, notifier; "
        "loaded = sorted(m for m in sys.modules if m.startswith('notifier.') "
        "or m.split('.')[0] in ('fastapi', 'pyarrow', 'aiokafka', 'pandas')); "
        "print(loaded)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
