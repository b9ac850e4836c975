"""Run real aiorma ranks on a simulated network, on virtual time."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..runtime import run_ranks
from .clock import run_virtual
from .network import SimNetwork

T = TypeVar("T")


def run_simulated(main: Callable[..., Awaitable[T]], network: SimNetwork, *args: Any) -> list[T]:
    """Run ``main(comm, *args)`` on every rank of ``network`` (real aiorma ranks: Comm, windows,
    engine) on a virtual clock; return the values, one per rank.  Like ``aiorma.run(...,
    transport="local")``: if a rank raises, the others are cancelled and the error propagates."""
    return run_virtual(run_ranks(main, args, network))
