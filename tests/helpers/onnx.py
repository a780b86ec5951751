"""Tiny onnxruntime models and what tests do with them: one that runs until it is stopped, for
tests of stopping runs; one of a few nodes, and workers starting at once on it, for the
optimized copies."""

from __future__ import annotations

import os
from pathlib import Path
from threading import Barrier

import numpy as np
import onnxruntime


def endless_model() -> bytes:
    """A serialized model whose one Loop adds 1 to its input for ever (no trip count, its
    condition always true): a run of it ends only when stopped."""
    import onnx
    from onnx import TensorProto, helper

    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["v_in", "one"], ["v_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [1]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [1]),
        ],
        [helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["", "always", "x"], ["y"], body=body)],
        "endless",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        [helper.make_tensor("always", TensorProto.BOOL, [], [True])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString())


def endless_run(session: onnxruntime.InferenceSession, failed: list[Exception]) -> None:
    """Run the endless model; note how it ended (it cannot end otherwise)."""
    try:
        session.run(None, {"x": np.zeros(1, dtype=np.float32)})
    except Exception as error:  # onnxruntime's own kind of error
        failed.append(error)


def tiny_model(path: Path) -> Path:
    """Write a model of a few nodes (loads in milliseconds) that onnxruntime optimizes (MatMul
    and Add into one Gemm), with a Ceil to expose, to `path`."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weights = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4) / 7, "w")
    bias = numpy_helper.from_array(np.full(4, 0.5, dtype=np.float32), "b")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["product"]),
            helper.make_node("Add", ["product", "b"], ["sum"]),
            helper.make_node("Ceil", ["sum"], ["ceiled"]),
            helper.make_node("Mul", ["ceiled", "sum"], ["y"]),
        ],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [weights, bias],
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def start_on_a_fresh_install(model: Path, data_dir: Path, barrier: Barrier) -> list[float]:
    """What each worker of an engine did on an empty data directory, all at the same moment:
    write the model it loads (the same bytes each time, through a file of its own renamed into
    place), then build its sessions of two widths on it. Returns what the wider one computes."""
    from speechgate.engines.onnx_session import ExtraOutput, OnnxOptions, WidthSessions

    whole = model.read_bytes()
    barrier.wait()
    written = model.with_name(f".{model.name}.{os.getpid()}.part")
    written.write_bytes(whole)
    os.replace(written, model)
    sessions = WidthSessions(model, (1, 2), OnnxOptions(), ExtraOutput("Ceil"), data_dir)
    outputs = sessions.use(2).run(None, {"x": np.ones((1, 4), np.float32)})
    return [float(value) for value in np.asarray(outputs[0]).ravel()]
