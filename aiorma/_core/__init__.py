"""The machinery under the public API that users never import: each rank's progress driver
(``driver``), its background poller (``waiter``), where an await decides how it waits
(``await_policy``), waits on own memory (``watch``), each window's
notified-access calls (``notified``), the World that makes windows (``world``) and the asyncio
loop hosted under trio (``host``).  The public names (``aiorma.progress``, ``Comm``, ``Window``,
``Request``) are re-exported at the top level."""
