"""Control packets between window engines: a fixed 24-byte binary layout, never pickle.

Every packet names its window and carries one ordinal, so matching is a compare against a
monotonic counter (DESIGN §5).  ``arg`` is the lock type for LOCK_REQUEST and the opened fence
ordinal for FENCE (``ordinal`` is then the closed one; 0 means "none").
"""

from __future__ import annotations

import enum
import struct

import attrs

_LAYOUT = struct.Struct("<BxxxIqq")
PACKET_SIZE = _LAYOUT.size


class PacketKind(enum.IntEnum):
    GATS_GRANT = 1  # target -> origin: "your access number `ordinal` towards me is granted"
    GATS_DONE = 2  # origin -> target: "my access number `ordinal` towards you is complete"
    FENCE = 3  # to every peer: "I closed fence epoch `ordinal` / opened fence epoch `arg`"
    LOCK_REQUEST = 4  # origin -> target: lock request number `ordinal`, type `arg`
    LOCK_GRANT = 5  # target -> origin: lock request number `ordinal` granted
    LOCK_RELEASE = 6  # origin -> target: lock number `ordinal` released, its RMA complete


@attrs.frozen
class ControlPacket:
    kind: PacketKind
    win_id: int
    ordinal: int
    arg: int = 0

    def encode(self) -> bytes:
        return _LAYOUT.pack(self.kind, self.win_id, self.ordinal, self.arg)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> ControlPacket:
        """Parse a packet; raises ValueError for anything that is not exactly one packet."""
        if len(data) != PACKET_SIZE:
            raise ValueError(f"control packet must be {PACKET_SIZE} bytes, got {len(data)}")
        kind, win_id, ordinal, arg = _LAYOUT.unpack(data)
        return cls(PacketKind(kind), win_id, ordinal, arg)
