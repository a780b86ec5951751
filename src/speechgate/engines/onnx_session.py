"""onnxruntime sessions for engines that run in a pinned worker."""

from __future__ import annotations

from pathlib import Path

import onnxruntime


def pinned_session(model: Path, threads: int) -> onnxruntime.InferenceSession:
    """A CPU session that uses exactly `threads` threads (the worker's cores).

    Libraries' own loaders build sessions on every core; a worker pinned to its own cores must
    use those and no others.
    """
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Idle pool threads would otherwise spin on a pinned worker's cores after every sentence,
    # stealing them from the next job (and from other workers sharing them).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(
        str(model), sess_options=options, providers=["CPUExecutionProvider"]
    )
