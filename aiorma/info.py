"""Window info: the four reorder flags of seed 001 §5.6.2 (rules 12–17)."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from .errors import RmaUsageError

_MPI_KEYS = {
    "MPI_WIN_ACCESS_AFTER_ACCESS_REORDER": "access_after_access_reorder",
    "MPI_WIN_ACCESS_AFTER_EXPOSURE_REORDER": "access_after_exposure_reorder",
    "MPI_WIN_EXPOSURE_AFTER_EXPOSURE_REORDER": "exposure_after_exposure_reorder",
    "MPI_WIN_EXPOSURE_AFTER_ACCESS_REORDER": "exposure_after_access_reorder",
}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@attrs.frozen(kw_only=True)
class Info:
    """Per-window hints.  All flags are off by default (no epoch reordering).

    Accepts the attribute spelling ``Info(access_after_access_reorder=True)`` or MPI-style string
    keys, ``Info({"MPI_WIN_ACCESS_AFTER_ACCESS_REORDER": "1"})`` (see :meth:`from_mapping`).
    """

    access_after_access_reorder: bool = attrs.field(default=False, converter=bool)
    access_after_exposure_reorder: bool = attrs.field(default=False, converter=bool)
    exposure_after_exposure_reorder: bool = attrs.field(default=False, converter=bool)
    exposure_after_access_reorder: bool = attrs.field(default=False, converter=bool)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, object]) -> Info:
        """Build from MPI-style keys (values "1"/"0"/"true"/"false") or attribute names."""
        fields: dict[str, bool] = {}
        for key, value in mapping.items():
            name = _MPI_KEYS.get(key, key)
            if name not in _MPI_KEYS.values():
                raise RmaUsageError(f"unknown info key {key!r}")
            fields[name] = _parse_bool(key, value)
        return cls(**fields)

    def to_mapping(self) -> dict[str, str]:
        """The MPI-style string form."""
        return {key: "1" if getattr(self, name) else "0" for key, name in _MPI_KEYS.items()}


def _parse_bool(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise RmaUsageError(f"info key {key!r} needs a boolean value, got {value!r}")


def as_info(info: Info | Mapping[str, object] | None) -> Info:
    if info is None:
        return Info()
    if isinstance(info, Info):
        return info
    if isinstance(info, Mapping):
        return Info.from_mapping(info)
    raise RmaUsageError(f"info must be an aiorma.Info or a mapping, not {type(info).__name__}")
