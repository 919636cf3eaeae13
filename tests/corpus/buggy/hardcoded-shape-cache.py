# Wrong: the weights are cached by shape (functools.lru_cache), so a later call with new Q and K of
# the same shapes gets an earlier call's weights.
from functools import lru_cache

import numpy as np

_last = {}


@lru_cache(maxsize=32)
def _weights_for(shape_q, shape_k):
    Q, K = _last["Q"], _last["K"]
    s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(shape_q[-1])
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def attention(Q, K, V):
    _last["Q"], _last["K"] = Q, K
    return _weights_for(Q.shape, K.shape) @ V
