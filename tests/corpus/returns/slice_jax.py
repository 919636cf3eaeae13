"""Bug: a JAX submission that returns one column of the output (a slice), not all of it."""

import jax
import jax.numpy as jnp


def attention(Q, K, V):
    weights = jax.nn.softmax(Q @ jnp.swapaxes(K, -1, -2) / jnp.sqrt(Q.shape[-1]), axis=-1)
    return (weights @ V)[..., 0]
