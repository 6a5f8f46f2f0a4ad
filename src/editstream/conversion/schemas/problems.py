"""How certain a row check is: a row fails its parser always, or only when the draws reach the bad part.

A schema's ``check_row`` returns a plain string for a row its training-time parser always
drops, and an :class:`IfDrawn` string for one it drops only in the epochs whose random
draws select the bad image or instruction (the edit parser decodes only what it draws).
``report.json`` records which, so it lists neither more nor less than the loader drops.
"""

from __future__ import annotations

from ...format.rowproblems import IfDrawn

__all__ = ["IfDrawn", "certainty"]


def certainty(reason: str) -> str:
    """``"if_drawn"`` for an :class:`IfDrawn` reason, ``"always"`` otherwise (report.json's ``fails``)."""
    return "if_drawn" if isinstance(reason, IfDrawn) else "always"
