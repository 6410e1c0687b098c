"""The vectors of the most recent texts, kept so that a text embedded twice in one process runs its model once: the
pipeline embeds an item's content for duplicate detection, and the learned gates read the same vector moments
later. Least recently used first out; safe for threads (the model runs outside the lock)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence

import numpy as np


class VectorCache:
    def __init__(self, size: int, dimensions: int) -> None:
        self.size, self.dimensions = size, dimensions
        self._rows: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._rows

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()

    def vectors(self, keys: Sequence[Hashable], compute: Callable[[list[int]], np.ndarray]) -> np.ndarray:
        """One row per key: cached rows as they are, the others from `compute(rows missing)`, then kept."""
        out = np.zeros((len(keys), self.dimensions), dtype=np.float32)
        with self._lock:
            missing = [row for row, key in enumerate(keys) if key not in self._rows]
            for row, key in enumerate(keys):
                if key in self._rows:
                    self._rows.move_to_end(key)
                    out[row] = self._rows[key]
        if missing:
            out[missing] = compute(missing)
            with self._lock:
                for row in missing:
                    self._rows[keys[row]] = out[row].copy()
                    self._rows.move_to_end(keys[row])
                while len(self._rows) > self.size:
                    self._rows.popitem(last=False)
        return out
