"""A profile's seeks or offers cut into its separate wants ("GPU hours, a lawyer, and a flat"): each is embedded
on its own as well, so one want is not averaged away by the others (docs/feed.md#reader-model)."""

from __future__ import annotations

import regex

MAX_CLAUSES = 4
_MIN_CHARS = 12  # a shorter piece ("by the hour") belongs to its neighbour
_BREAKS = regex.compile(
    r"[.;!?。\uff1b\uff01\uff1f\n]+|,\s+(?:and|or)\s+|,\s+|[\uff0c、]\s*(?:以及|和|及)?|(?:、|。)?そして"
)


def clauses(text: str) -> list[str]:
    """The text's clauses (at most MAX_CLAUSES, the shortest merged into their neighbours); [] when it has only
    one (the whole text already stands for it)."""
    pieces = [piece.strip() for piece in _BREAKS.split(text) if piece and piece.strip()]
    merged: list[str] = []
    for piece in pieces:
        if merged and (len(piece) < _MIN_CHARS or len(merged[-1]) < _MIN_CHARS):
            merged[-1] = f"{merged[-1]}, {piece}"
        else:
            merged.append(piece)
    while len(merged) > MAX_CLAUSES:  # join the two shortest neighbours
        at = min(range(len(merged) - 1), key=lambda i: len(merged[i]) + len(merged[i + 1]))
        merged[at : at + 2] = [f"{merged[at]}, {merged[at + 1]}"]
    return merged if len(merged) > 1 else []
