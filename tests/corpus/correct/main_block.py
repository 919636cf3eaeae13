import numpy as np


def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def attention(Q, K, V):
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)
    return softmax(scores) @ V


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    Q = rng.standard_normal((2, 3, 4))
    K = rng.standard_normal((2, 5, 4))
    V = rng.standard_normal((2, 5, 7))
    out = attention(Q, K, V)
    print("demo output shape:", out.shape)
    print(out[0])
