"""kann's Python API next to ONNX Runtime's: the same calling convention and the same outputs.

The bundled digits CNN and a small network built here with onnx.helper (grouped and strided
convolutions, BatchNormalization, Add, AveragePool, Softmax, two outputs), in FP32 on 1 and 5
clusters, against onnxruntime.InferenceSession on the same inputs. Runs in the test venv
(scripts/setup-venv.sh: Debian's interpreter plus ONNX Runtime); exits 77 (skipped) without it.
"""
import os
import sys
import unittest

import numpy as np

try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    print(f"SKIP: ONNX Runtime is not available ({e}); run scripts/setup-venv.sh")
    sys.exit(77)

import kann

DIGITS = os.environ["KANN_DIGITS_DIR"]


def small_cnn(seed=7):
    """[1,3,16,16] -> conv3x3 s2 (8) -> BN -> Relu -> grouped conv (8, g=2) -> Add (residual)
    -> AveragePool 2 -> Flatten -> Gemm(10) -> Softmax; outputs: the probabilities and the
    pooled features."""
    rng = np.random.default_rng(seed)

    def init(name, shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [init("w1", (8, 3, 3, 3)), init("b1", (8,)),
             numpy_helper.from_array((1 + 0.1 * rng.standard_normal(8)).astype(np.float32), "gamma"),
             init("beta", (8,), 0.1), init("mean", (8,), 0.1),
             numpy_helper.from_array((1 + rng.random(8)).astype(np.float32), "var"),
             init("w2", (8, 4, 3, 3)), init("b2", (8,)), init("wg", (10, 128)), init("bg", (10,))]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("BatchNormalization", ["c1", "gamma", "beta", "mean", "var"], ["bn"], name="bn"),
        helper.make_node("Relu", ["bn"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], group=2,
                         pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("Add", ["c2", "r1"], ["sum"], name="residual"),
        helper.make_node("AveragePool", ["sum"], ["pooled"], kernel_shape=[2, 2], strides=[2, 2],
                         name="pool"),
        helper.make_node("Flatten", ["pooled"], ["flat"], axis=1, name="flatten"),
        helper.make_node("Gemm", ["flat", "wg", "bg"], ["logits"], transB=1, name="fc"),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1, name="softmax"),
    ]
    graph = helper.make_graph(
        nodes, "small_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 10]),
         helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [1, 8, 4, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


class SameAsOnnxRuntime(unittest.TestCase):
    def compare(self, model, feeds_list, clusters, output_names=None, tol=1e-4):
        bytes_ = model if isinstance(model, bytes) else model.SerializeToString()
        reference = ort.InferenceSession(bytes_, providers=["CPUExecutionProvider"])
        session = kann.Session(kann.compile(bytes_, clusters=clusters))
        # The same introspection as ONNX Runtime.
        self.assertEqual([i.name for i in session.get_inputs()], [i.name for i in reference.get_inputs()])
        self.assertEqual([o.name for o in session.get_outputs()], [o.name for o in reference.get_outputs()])
        self.assertEqual([tuple(i.shape) for i in session.get_inputs()],
                         [tuple(i.shape) for i in reference.get_inputs()])
        worst = 0.0
        for feeds in feeds_list:
            expected = reference.run(output_names, feeds)
            got = session.run(output_names, feeds)
            self.assertEqual(len(got), len(expected))
            for g, e in zip(got, expected):
                self.assertEqual(g.shape, e.shape)
                self.assertEqual(g.dtype, np.float32)
                np.testing.assert_allclose(g, e, atol=tol, rtol=tol)
                worst = max(worst, float(np.abs(g - e).max()))
        print(f"  {clusters} cluster(s), outputs {output_names or 'all'}: max |kann - ORT| {worst:.3g}")
        return session

    def test_digits(self):
        with open(os.path.join(DIGITS, "model.onnx"), "rb") as f:
            model = f.read()
        inputs = np.load(os.path.join(DIGITS, "test_inputs.npy"))[:20]
        feeds = [{"input": inputs[i:i + 1]} for i in range(len(inputs))]
        for clusters in (1, 5):
            session = self.compare(model, feeds, clusters)
            self.assertGreater(session.modeled_seconds, 0)

    def test_small_cnn_both_outputs(self):
        model = small_cnn()
        rng = np.random.default_rng(1)
        feeds = [{"x": rng.standard_normal((1, 3, 16, 16)).astype(np.float32)} for _ in range(4)]
        for clusters in (1, 5):
            self.compare(model, feeds, clusters)
        self.compare(model, feeds, 2, output_names=["pooled"])
        self.compare(model, feeds, 2, output_names=["pooled", "probs"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
