# Bug: jax.nn.dot_product_attention computes softmax(Q K^T / sqrt(d_k)) V, but requires the
# values' size to be the keys' (d_v == d_k): it raises on every other input.
import jax
import jax.numpy as jnp


def attention(Q, K, V):
    # It takes (B, T, N, H): one head, the leading axes flattened into B.
    q, k, v = (jnp.asarray(x).reshape(-1, x.shape[-2], 1, x.shape[-1]) for x in (Q, K, V))
    out = jax.nn.dot_product_attention(q, k, v)
    return out.reshape(*Q.shape[:-1], out.shape[-1])
