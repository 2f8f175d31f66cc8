#!/usr/bin/python3
"""Writes a large ONNX model for measuring import time and memory.

LAYERS Gemm+Relu layers of width 2048 (16 MiB of f32 weights and a bias
each, in raw_data) on an input x [8,2048], then a ReduceSum to a scalar
loss, at opset 17. The default, 61 layers, is about 1 GB.

Usage: /usr/bin/python3 tests/onnx/big.py OUT.onnx [LAYERS]
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

D = 2048


def main():
    out = sys.argv[1]
    layers = int(sys.argv[2]) if len(sys.argv) > 2 else 61
    rng = np.random.default_rng(1)
    inits, nodes, prev = [], [], "x"
    for l in range(layers):
        w = (rng.standard_normal((D, D), dtype=np.float32) * 0.02)
        b = np.zeros(D, dtype=np.float32)
        inits += [numpy_helper.from_array(w, f"w{l}"), numpy_helper.from_array(b, f"b{l}")]
        nodes += [helper.make_node("Gemm", [prev, f"w{l}", f"b{l}"], [f"z{l}"], transB=1),
                  helper.make_node("Relu", [f"z{l}"], [f"h{l}"])]
        prev = f"h{l}"
    nodes.append(helper.make_node("ReduceSum", [prev], ["loss"], keepdims=0))
    graph = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, D])],
                              [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), out)


if __name__ == "__main__":
    main()
