"""An MCL_CUSTOM_WHOLE operator from Python: com.example::ConcatScaled (two inputs, an output
of another shape, computed once on whole tensors) between operators kann knows, compiled for
1 and 5 clusters in FP32 and FP16 and run through the ICD (kann.Session), against numpy
(FP32 within 1e-6, FP16 within 2e-3), with B an input and with B a constant (an initializer:
loaded with the operator's parameters); a model its output_shape callback refuses is a
one-line kann.Error.

usage: check_whole.py LIB.so   (PYTHONPATH: <build>/python, OCL_ICD_VENDORS set)
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import kann


def model(b_shape, b_constant=None):
    inputs = [helper.make_tensor_value_info("A", TensorProto.FLOAT, [1, 3, 6, 5])]
    initializers = []
    if b_constant is None:
        inputs.append(helper.make_tensor_value_info("B", TensorProto.FLOAT, b_shape))
    else:
        initializers.append(numpy_helper.from_array(b_constant, "B"))
    nodes = [
        helper.make_node("Relu", ["A"], ["RA"], name="relu"),
        helper.make_node("ConcatScaled", ["RA", "B"], ["C"], name="concat_scaled",
                         domain="com.example", alpha=0.5),
        helper.make_node("Sigmoid", ["C"], ["Y"], name="gate"),
    ]
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "custom_whole", inputs, [y], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                   helper.make_opsetid("com.example", 1)])


kann.load_custom_ops(sys.argv[1])
rng = np.random.default_rng(11)
a = rng.standard_normal((1, 3, 6, 5)).astype(np.float32)
b = rng.standard_normal((1, 2, 6, 5)).astype(np.float32)
expected = 1 / (1 + np.exp(-np.concatenate([np.maximum(a, 0), 0.5 * b], axis=1)))
worst = {}
for constant in (False, True):
    for precision, tolerance in (("fp32", 1e-6), ("fp16", 2e-3)):
        for clusters in (1, 5):
            m = model([1, 2, 6, 5], b if constant else None)
            session = kann.Session(kann.compile(m, clusters=clusters, precision=precision))
            (y,) = session.run(None, {"A": a} if constant else {"A": a, "B": b})
            assert y.shape == (1, 5, 6, 5), y.shape
            error = float(np.abs(y - expected).max())
            print(f"B {'constant' if constant else 'input'}: {precision} on {clusters} "
                  f"cluster(s): max |error| {error:.3g} vs numpy")
            if error > tolerance:
                sys.exit(1)
try:
    kann.compile(model([1, 2, 4, 5]), clusters=1)  # B's height differs: the callback refuses
    print("a model the output_shape callback refuses compiled")
    sys.exit(1)
except kann.Error as e:
    print(f"refused: {e}")
    if "output_shape callback of com.example::ConcatScaled returned 1" not in str(e):
        sys.exit(1)
