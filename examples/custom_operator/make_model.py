"""Writes the example's ONNX model: X[1,8,24,20] -> Neg -> com.example::ScaledSoftsign(alpha,
beta) -> Sigmoid -> Y, so the custom operator runs between operators kann knows (and in
place: Neg's output dies at it).

usage: make_model.py OUT.onnx
"""
import sys

import onnx
from onnx import TensorProto, helper

x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 8, 24, 20])
y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 8, 24, 20])
nodes = [
    helper.make_node("Neg", ["X"], ["N"], name="negate"),
    helper.make_node("ScaledSoftsign", ["N"], ["S"], name="softsign", domain="com.example",
                     alpha=1.5, beta=-0.25),
    helper.make_node("Sigmoid", ["S"], ["Y"], name="gate"),
]
graph = helper.make_graph(nodes, "custom_operator_example", [x], [y])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                helper.make_opsetid("com.example", 1)])
onnx.save(model, sys.argv[1])
