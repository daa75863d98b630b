"""Operators of issue 14 against ONNX Runtime, through the ICD (kann.Session), on small models
built here with onnx.helper: grouped and depthwise ConvTranspose, Pad in its reflect and edge
modes (and pads given as inputs). FP32 within 1e-4 and FP16 within 2e-2 (absolute +
relative), on 1 and 5 clusters. Runs in the test venv (scripts/setup-venv.sh: Debian's
interpreter plus ONNX Runtime); exits 77 (skipped) without it.
"""
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

TOLERANCE = {"fp32": 1e-4, "fp16": 2e-2}


def make_model(nodes, inputs, outputs, initializers, opset=13):
    graph = helper.make_graph(
        nodes, "ops", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    # The outputs' shapes from ONNX's shape inference.
    model = onnx.shape_inference.infer_shapes(model)
    del model.graph.value_info[:]
    onnx.checker.check_model(model)
    return model.SerializeToString()


def weight(rng, name, shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


class OperatorsAgainstOnnxRuntime(unittest.TestCase):
    def compare(self, model, feeds_list, clusters=(1, 5), precisions=("fp32", "fp16")):
        reference = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        for precision in precisions:
            tol = TOLERANCE[precision]
            for k in clusters:
                session = kann.Session(kann.compile(model, clusters=k, precision=precision))
                worst = 0.0
                for feeds in feeds_list:
                    expected = reference.run(None, feeds)
                    got = session.run(None, feeds)
                    for g, e in zip(got, expected):
                        self.assertEqual(g.shape, e.shape)
                        np.testing.assert_allclose(g, e, atol=tol, rtol=tol)
                        worst = max(worst, float(np.abs(g - e).max()))
                print(f"  {precision} on {k} cluster(s): max |kann - ORT| {worst:.3g}")

    def test_grouped_conv_transpose(self):
        """A decoder: Conv -> ConvTranspose with 2 groups (stride 2, pads, output padding)
        -> Relu -> depthwise ConvTranspose (group = channels, stride 2, dilation 2) -> a
        ConvTranspose with 4 groups of 3x3 taps and stride 1."""
        rng = np.random.default_rng(14)
        inits = [weight(rng, "w0", (8, 3, 3, 3)), weight(rng, "w1", (8, 6, 3, 3)),
                 weight(rng, "b1", (12,)), weight(rng, "w2", (12, 1, 3, 3)), weight(rng, "b2", (12,)),
                 weight(rng, "w3", (12, 2, 3, 3))]
        nodes = [
            helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]),
            helper.make_node("ConvTranspose", ["c0", "w1", "b1"], ["t1"], group=2, strides=[2, 2],
                             pads=[1, 1, 1, 1], output_padding=[1, 1]),
            helper.make_node("Relu", ["t1"], ["r1"]),
            helper.make_node("ConvTranspose", ["r1", "w2", "b2"], ["t2"], group=12, strides=[2, 2],
                             dilations=[2, 2], pads=[2, 1, 2, 1]),
            helper.make_node("ConvTranspose", ["t2", "w3"], ["y"], group=4, pads=[1, 1, 1, 1]),
        ]
        model = make_model(nodes, [("x", [1, 3, 9, 7])], ["y"], inits)
        feeds = [{"x": rng.standard_normal((1, 3, 9, 7)).astype(np.float32)} for _ in range(2)]
        self.compare(model, feeds)

    def pad_model(self, mode, shape, pads, value=None, axes=None, then_conv=False, opset=13):
        """Pad (pads, constant_value and axes as constant inputs), optionally followed by a
        convolution (a Pad that is not a zero padding does not fold into it)."""
        rng = np.random.default_rng(len(shape) + sum(pads))
        inits = [numpy_helper.from_array(np.array(pads, np.int64), "pads")]
        inputs = ["x", "pads"]
        if value is not None or axes is not None:
            inits.append(numpy_helper.from_array(np.array(value or 0.0, np.float32), "value"))
            inputs.append("value")
        if axes is not None:
            inits.append(numpy_helper.from_array(np.array(axes, np.int64), "axes"))
            inputs.append("axes")
        nodes = [helper.make_node("Pad", inputs, ["p" if then_conv else "y"], mode=mode)]
        if then_conv:
            inits.append(weight(rng, "w", (4, shape[1], 3, 3)))
            nodes.append(helper.make_node("Conv", ["p", "w"], ["y"]))
        model = make_model(nodes, [("x", shape)], ["y"], inits, opset=opset)
        feeds = [{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(2)]
        return model, feeds

    def test_pad_modes_on_images(self):
        """reflect / edge / constant (non-zero value) of H and W, and of the channels, of an
        image; a reflect padding before a convolution (the style-transfer / CycleGAN form)."""
        for mode in ("reflect", "edge", "constant"):
            for pads in ([0, 0, 1, 3, 0, 0, 2, 1], [0, 2, 1, 0, 0, 1, 0, 2]):
                with self.subTest(mode=mode, pads=pads):
                    value = 1.5 if mode == "constant" else None
                    self.compare(*self.pad_model(mode, [1, 3, 6, 7], pads, value))
        self.compare(*self.pad_model("reflect", [1, 3, 8, 8], [0, 0, 3, 3, 0, 0, 3, 3],
                                     then_conv=True))

    def test_pad_modes_on_other_tensors(self):
        """Row-major tensors of rank 1..3 (and a 4-D one with a leading unit dimension), the
        axes input of opset 18."""
        for mode in ("reflect", "edge", "constant"):
            with self.subTest(mode=mode):
                self.compare(*self.pad_model(mode, [9], [2, 3]))
                self.compare(*self.pad_model(mode, [5, 7], [1, 2, 3, 1]))
                self.compare(*self.pad_model(mode, [3, 4, 6], [1, 0, 2, 2, 1, 0]))
                self.compare(*self.pad_model(mode, [4, 5, 6], [2, 1], value=-0.5, axes=[-1],
                                             opset=18))


if __name__ == "__main__":
    unittest.main(verbosity=2)
