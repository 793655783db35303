"""Burrow's conformance vectors: the copy in tests/conformance_vectors (see its README), so a
clone on its own runs every test; a test checks it still equals ../shared/conformance beside the
checkout (or NOTIFIER_CONFORMANCE_DIR) wherever that exists."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VECTORS_DIR = Path(__file__).resolve().parent / "conformance_vectors"
SHARED_DIR = Path(
    os.environ.get("NOTIFIER_CONFORMANCE_DIR", ROOT.parent / "shared" / "conformance")
)
"""Where the vectors are maintained, when it is beside the checkout (CI has it there)."""


def load_vectors(name: str) -> list[dict[str, Any]]:
    vectors: list[dict[str, Any]] = json.loads((VECTORS_DIR / name).read_text())
    return vectors
