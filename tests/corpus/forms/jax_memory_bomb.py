"""Allocates 2 GB in the call: the memory limit, counted after the framework import, stops it."""

import jax.numpy as jnp


def attention(q, k, v):
    big = jnp.ones(2**28)  # 2 GB
    return big.sum() + q
