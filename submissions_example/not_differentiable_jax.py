"""Bug (JAX): stop_gradient on the shifted scores, not on the shift alone: no gradient reaches Q or K."""

import jax
import jax.numpy as jnp


def attention(q, k, v):
    scores = q @ jnp.swapaxes(k, -1, -2) / jnp.sqrt(q.shape[-1])
    scores = jax.lax.stop_gradient(scores - scores.max(axis=-1, keepdims=True))
    weights = jnp.exp(scores)
    return (weights / weights.sum(axis=-1, keepdims=True)) @ v
