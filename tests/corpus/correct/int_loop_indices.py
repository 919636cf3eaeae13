# Correct: integers only count and index (int(), np.arange); every value is computed in float64.
import numpy as np


def attention(Q, K, V):
    batch = Q.shape[:-2]
    q2 = Q.reshape((-1,) + Q.shape[-2:])
    k2 = K.reshape((-1,) + K.shape[-2:])
    v2 = V.reshape((-1,) + V.shape[-2:])
    out = np.zeros((q2.shape[0], q2.shape[1], v2.shape[-1]), dtype=np.float64)
    scale = 1.0 / np.sqrt(float(Q.shape[-1]))
    for b in np.arange(q2.shape[0], dtype=int):
        for i in range(int(q2.shape[1])):
            s = k2[b] @ q2[b, i] * scale
            w = np.exp(s - s.max())
            out[b, i] = (w / w.sum()) @ v2[b]
    return out.reshape(batch + out.shape[-2:])
