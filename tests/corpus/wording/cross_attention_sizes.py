# Right: every size read from its own input (T_q from Q, T_k from K, d_v from V), so
# cross-attention with d_v != d_k runs like self-attention.
import numpy as np


def attention(Q, K, V):
    t_q, d_k = Q.shape[-2:]
    t_k, d_v = V.shape[-2:]
    q = Q.reshape(-1, t_q, d_k)
    k = K.reshape(-1, t_k, d_k)
    v = V.reshape(-1, t_k, d_v)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return (w @ v).reshape(*Q.shape[:-2], t_q, d_v)
