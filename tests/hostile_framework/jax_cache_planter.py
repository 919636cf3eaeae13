# Looks for the batch's JAX compile cache (its folder is in JAX's own configuration) and tries to
# plant, replace, move or delete entries there, or to open the folder up, so that a later
# candidate's worker would run its code. Prints what each attempt did, then computes attention
# correctly. Bounded: a few file operations, no loop.
import os

import jax
import jax.numpy as jnp

folder = jax.config.jax_compilation_cache_dir
if not folder:
    print("cache: none offered")
else:
    entries = sorted(os.listdir(folder))
    target = os.path.join(folder, entries[0]) if entries else os.path.join(folder, "missing")
    attempts = {
        "plant": lambda: open(os.path.join(folder, "jit_matmul-planted-cache"), "wb").write(b"\0" * 64),
        "overwrite": lambda: open(target, "r+b").write(b"\0"),
        "rename": lambda: os.rename(target, target + ".old"),
        "delete": lambda: os.unlink(target),
        "chmod": lambda: os.chmod(folder, 0o777),
    }
    results = []
    for name, attempt in attempts.items():
        try:
            attempt()
            results.append(f"{name}: done")
        except OSError as exc:
            results.append(f"{name}: refused")
    print(f"cache: {len(entries)} entries; " + "; ".join(results))


def attention(Q, K, V):
    scores = Q @ jnp.swapaxes(K, -1, -2) / jnp.sqrt(Q.shape[-1])
    return jax.nn.softmax(scores, axis=-1) @ V
