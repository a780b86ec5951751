"""onnxruntime sessions for engines that run in a pinned worker."""

from __future__ import annotations

from pathlib import Path

import onnxruntime


def pinned_session(
    model: Path, threads: int, *, memory_pattern: bool = True, cpu_arena: bool = True
) -> onnxruntime.InferenceSession:
    """A CPU session that uses exactly `threads` threads (the worker's cores).

    Libraries' own loaders build sessions on every core; a worker pinned to its own cores must
    use those and no others. `memory_pattern` and `cpu_arena` are onnxruntime's options of the
    same names (both on by default there): with inputs of a new shape on every call (a TTS
    graph's token count changes with every sentence) the memory pattern plans and the arena's
    cached blocks grow the process by hundreds of megabytes; each engine chooses from
    measurements (see its module).
    """
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.enable_mem_pattern = memory_pattern
    options.enable_cpu_mem_arena = cpu_arena
    # Idle pool threads would otherwise spin on a pinned worker's cores after every sentence,
    # stealing them from the next job (and from other workers sharing them).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(
        str(model), sess_options=options, providers=["CPUExecutionProvider"]
    )
