# jax.nn.softmax(s, axis=1): the keys of one sequence, the queries of a 3-D batch, the heads of a
# 4-D one.
import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)


def attention(Q, K, V):
    s = jnp.matmul(Q, jnp.swapaxes(K, -1, -2)) / jnp.sqrt(K.shape[-1])
    p = jax.nn.softmax(s, axis=1)
    return jnp.matmul(p, V)
