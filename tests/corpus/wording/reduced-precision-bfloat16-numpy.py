# Bug: bfloat16 emulated in NumPy (float32's top 16 bits, rounded to nearest even) at every
# step, widened to float64 at the end.
import numpy as np


def _bfloat16(x):
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)


def attention(Q, K, V):
    s = _bfloat16(_bfloat16(Q) @ np.swapaxes(_bfloat16(K), -1, -2) / np.sqrt(Q.shape[-1]))
    s = s - s.max(axis=-1, keepdims=True)
    w = _bfloat16(np.exp(s))
    w = _bfloat16(w / w.sum(axis=-1, keepdims=True))
    return _bfloat16(w @ _bfloat16(V)).astype(np.float64)
