"""Identity of inputs, the test the controller's memories share (transitions.TransitionMemo.holds,
replay.QuietDecision.waits): a memory is read again only while what it was made from is the very same
objects in the same order; equal copies do not count (frozen objects: the same object is the same value)."""

from __future__ import annotations

from collections.abc import Sequence


def same_objects(these: Sequence[object], those: Sequence[object]) -> bool:
    """Whether ``these`` and ``those`` hold the same objects (by identity) in the same order."""
    if len(these) != len(those):
        return False
    # (by index: zip(strict=True) is a generic call from compiled code)
    return all(these[i] is those[i] for i in range(len(these)))
