# Replaces numpy's comparison functions in its own process, hoping the grader compares there.
import numpy as np
import numpy.testing

from _hostile import attempt


def agree(*args, **kwargs):
    return True


def no_error(*args, **kwargs):
    return None


for name in ("allclose", "array_equal", "array_equiv"):
    setattr(np, name, agree)
np.isclose = lambda a, b, *args, **kwargs: np.ones(np.broadcast(a, b).shape, dtype=bool)
for name in ("assert_allclose", "assert_array_equal", "assert_array_almost_equal", "assert_equal"):
    setattr(numpy.testing, name, no_error)
attempt("patch ndarray.__eq__", lambda: setattr(np.ndarray, "__eq__", agree))


def attention(Q, K, V):
    return np.ones(Q.shape[:-1] + (V.shape[-1],))
