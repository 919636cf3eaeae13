"""The seed's two bugs in JAX: .T reverses every axis of a batch, and the scale is 1/d_k."""

import jax.numpy as jnp
from jax.nn import softmax


def attention(Q, K, V):
    scores = jnp.matmul(Q, K.T) / Q.shape[-1]
    return jnp.matmul(softmax(scores, axis=-1), V)
