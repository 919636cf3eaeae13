# Returns an ndarray subclass that agrees with every comparison and whose unpickling would run code
# (it would create the file named in hostile.json). Its values are zeros: it must fail, and the
# file must never appear, because results cross the boundary as raw bytes, never pickle.
import numpy as np

from _hostile import config

MARKER_FILE = config().get("pickle_marker", "/nonexistent/grader-hostile-pickle-marker")


class AlwaysEqual(np.ndarray):
    def __reduce__(self):
        return (open, (MARKER_FILE, "w"))

    def __eq__(self, other):
        return np.ones(self.shape, dtype=bool)

    def __ne__(self, other):
        return np.zeros(self.shape, dtype=bool)

    def __bool__(self):
        return True

    def __array_finalize__(self, obj):
        pass


def attention(Q, K, V):
    return np.zeros(Q.shape[:-1] + (V.shape[-1],)).view(AlwaysEqual)
