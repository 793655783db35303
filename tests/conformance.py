"""Where Burrow's conformance vectors live: ../shared/conformance beside the checkout.

CI always has it. Elsewhere set NOTIFIER_CONFORMANCE_DIR, or the tests that need it skip and
say why; the vectors are never copied into this repository.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFORMANCE_DIR = Path(
    os.environ.get("NOTIFIER_CONFORMANCE_DIR", ROOT.parent / "shared" / "conformance")
)


def load_vectors(name: str) -> list[dict[str, Any]]:
    path = CONFORMANCE_DIR / name
    if not path.exists():
        if os.environ.get("CI"):
            raise FileNotFoundError(
                f"{path}: CI must have ../shared/conformance beside the checkout"
            )
        pytest.skip(
            f"Burrow conformance vectors not found at {path} (set NOTIFIER_CONFORMANCE_DIR)",
            allow_module_level=True,
        )
    return json.loads(path.read_text())
