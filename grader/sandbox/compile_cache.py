"""The worker's half of a batch's JAX compile cache (the grader's half, which fills it, is
grader.jax_cache): use the folder where this worker cannot write to it, and never write."""

from __future__ import annotations

import warnings

from grader.sandbox.isolation.model import Layer

LAYER = "compile-cache"  # the entry a JAX worker's report adds to its sandbox layers
# A compile time no compilation reaches: JAX then never writes an entry (see use_compile_cache).
NEVER_S = 1e9


def use_compile_cache(folder: str, write: bool) -> None:
    """Point this process's JAX at ``folder``. ``write=False`` (a worker): entries are read and
    never written. The same options on both sides: they are part of every entry's key. Raises
    AttributeError on a JAX without these options (the worker then goes without)."""
    import jax

    jax.config.update("jax_compilation_cache_dir", folder)
    # No XLA side caches: their folder would be one more thing in the key and the folder.
    jax.config.update("jax_persistent_cache_enable_xla_caches", "none")
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0 if write else NEVER_S)
    if not write:
        # An entry that cannot be read (another JAX build's) is compiled instead; JAX's warning
        # about it would land in the submission's captured output.
        warnings.filterwarnings("ignore", message="Error reading persistent compilation cache entry")


def open_compile_cache(folder: str | None, layers: list[Layer]) -> Layer | None:
    """In a JAX worker, after isolation: use the run's ``folder`` if this worker cannot write to
    it. The report's entry for it, or None when the run offered none."""
    if not folder:
        return None
    if not any(layer.name == "landlock-fs" and layer.active for layer in layers):
        return Layer(LAYER, False, "not used: without Landlock's filesystem rules this worker could write to the run's cache")
    try:
        use_compile_cache(folder, write=False)
    except AttributeError as exc:  # a JAX without these options
        return Layer(LAYER, False, f"not used: {exc}")
    return Layer(LAYER, True, "JAX reads compiled operations from the run's cache, which only the grader writes (read-only here)")
