"""Window info: the four reorder flags of Zounmevo (2014) §5.6.2 (rules 12–17)."""

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


def _flag(value: object) -> bool:
    return _parse_bool("reorder flag", value)


@attrs.frozen(kw_only=True)
class Info:
    """Per-window hints.  All flags are off by default (no epoch reordering).

    Two spellings: ``Info(access_after_access_reorder=True)``, or MPI-style string keys through
    :meth:`Info.from_mapping` — ``Info.from_mapping({"MPI_WIN_ACCESS_AFTER_ACCESS_REORDER": "1"})``.
    ``win_create``/``win_allocate`` take either an ``Info`` or such a mapping directly.  Values are
    booleans or "1"/"0"/"true"/"false"/"yes"/"no"/"on"/"off"; anything else is refused.
    """

    access_after_access_reorder: bool = attrs.field(default=False, converter=_flag)
    access_after_exposure_reorder: bool = attrs.field(default=False, converter=_flag)
    exposure_after_exposure_reorder: bool = attrs.field(default=False, converter=_flag)
    exposure_after_access_reorder: bool = attrs.field(default=False, converter=_flag)

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
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
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
