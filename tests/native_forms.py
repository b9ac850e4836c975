"""What a test of a C extension's form needs: the compiled form, or why the test cannot run."""

from __future__ import annotations

from typing import TypeVar

import pytest

from aiorma import _native

T = TypeVar("T")


def compiled(form: T | None, name: str, fallback: str) -> T:
    """``form``, a compiled extension or one of its functions; a failure where the build is in
    use but left none, a skip where this process runs from source (``fallback`` says what then
    serves)."""
    if form is None:
        if _native.choose().compiled:
            pytest.fail(f"the build is in use but left no compiled {name}")
        pytest.skip(f"no compiled {name} here ({fallback})")
    return form
