"""JAX's persistent compilation cache for the trial processes of `backend: jax`: a stack shape compiled once on this
machine is loaded by later trial processes and sessions instead of compiled again (SOBA's two programs on 2 cores:
~1.0-1.2 s compiled, 0.16 s loaded).

The cache is the user's own directory (`$XDG_CACHE_HOME/bisweep/jax`, else `~/.cache/bisweep/jax`), never one in a
results directory: it holds compiled programs, which only this user's processes write. JAX keys each entry by the
program, its compile options, JAX's version and the device, so an entry made by another JAX or for another device is
never used. A cache directory set through JAX's own settings (`JAX_COMPILATION_CACHE_DIR`) is left as it is.
"""
from __future__ import annotations

import functools
import importlib.util

from sweep.tracking.mlflow_store import cache_dir

#: Programs that compile faster than this are not kept (JAX's default, 1 s, would keep none on a fast machine).
MIN_COMPILE_SECONDS = 0.1
#: The most the cache holds (bytes; a stack shape's programs are ~25 KB): the least recently used go beyond it. A
#: bound also makes JAX lock the directory around each read and write, so that trial processes compiling the same
#: program at once never read one half written.
MAX_BYTES = 256 * 2**20


@functools.cache
def use_compilation_cache() -> None:
    """Point JAX's persistent compilation cache at the user's cache directory, once per process and before its first
    compile (JAX decides at its first compile whether a process uses the cache)."""
    import jax

    if jax.config.jax_compilation_cache_dir is None:
        jax.config.update("jax_compilation_cache_dir", str(cache_dir() / "jax"))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
        if importlib.util.find_spec("filelock") is not None:  # JAX's bounded cache needs it (Ray brings it)
            jax.config.update("jax_compilation_cache_max_size", MAX_BYTES)
