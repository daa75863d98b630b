"""Operators of issue 14 against ONNX Runtime, through the ICD (kann.Session), on small models
built here with onnx.helper: grouped and depthwise ConvTranspose, Pad in its reflect and edge
modes (and pads given as inputs), Slice with negative steps, PRelu per channel, per element and
with an activation slope, constant operands that are not per channel, Gemm with transA / a
matrix C, FP32 within 1e-4 and FP16 within 2e-2 (absolute + relative), on 1 and 5 clusters;
com.microsoft QLinearAdd / QLinearConcat (from ONNX Runtime's quantizer and by hand) within one
quantization step and equal to the operators' definition computed in NumPy
(qoperator_definition; full-range weights against the definition only); INT8 calibration of a
two-input model. Runs in the test venv (scripts/setup-venv.sh: Debian's interpreter plus ONNX
Runtime); exits 77 (skipped) without it.
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


def quantize_qoperator(float_model, samples, reduce_range=True):
    """ONNX Runtime's quantize_static in QOperator format (uint8 activations, int8 weights),
    calibrated on `samples` of the model's one input "x". `reduce_range` (the default) quantizes
    the weights to 7 bits: on x86 hosts without AVX-512 VNNI (AVX2 only, e.g. AMD Zen 3) ONNX
    Runtime's U8S8 convolution multiplies with vpmaddubsw, which saturates the sum of two
    uint8 x int8 products to int16 (255 * 127 * 2 > 32767), so its QLinearConv on full-range
    weights is not the operator's definition there; with |w| <= 64 it is exact on every
    host (ONNX Runtime's documented remedy)."""
    import os
    import tempfile

    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.data = iter([{"x": x} for x in samples])

        def get_next(self):
            return next(self.data, None)

    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "float.onnx"), os.path.join(tmp, "int8.onnx")
        with open(src, "wb") as f:
            f.write(float_model)
        quantize_static(src, dst, Reader(), quant_format=QuantFormat.QOperator,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        reduce_range=reduce_range)
        return onnx.load(dst)


def qoperator_definition(model, feeds):
    """A QOperator graph (QuantizeLinear, QLinearConv without groups or strides, QLinearAdd,
    QLinearConcat, DequantizeLinear) evaluated by the operators' definitions in NumPy: exact
    integer accumulation, float32 scales, rounding half to even, saturation to the output's
    type. The reference that no host's SIMD kernels can bend."""
    values = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    values.update(feeds)
    f32 = np.float32

    def saturate(q, zero):
        info = np.iinfo(zero.dtype)
        return np.clip(q, info.min, info.max).astype(zero.dtype)

    def quantize(x, scale, zero):
        return saturate(np.rint(x.astype(f32) / f32(scale)) + np.int64(zero), zero)

    def dequantize(q, scale, zero):
        return (q.astype(np.int64) - np.int64(zero)).astype(f32) * f32(scale)

    for node in model.graph.node:
        a = [values[n] if n else None for n in node.input]
        attr = {x.name: helper.get_attribute_value(x) for x in node.attribute}
        if node.op_type == "QuantizeLinear":
            out = quantize(*a[:3])
        elif node.op_type == "DequantizeLinear":
            out = dequantize(*a[:3])
        elif node.op_type == "QLinearConv":
            x, sx, zx, w, sw, zw, sy, zy = a[:8]
            assert attr.get("group", 1) == 1 and set(attr.get("strides", [1])) == {1}
            top, left, bottom, right = attr.get("pads", [0, 0, 0, 0])
            xi = np.pad(x.astype(np.int64) - np.int64(zx),
                        ((0, 0), (0, 0), (top, bottom), (left, right)))
            wi = w.astype(np.int64) - np.asarray(zw, np.int64).reshape(-1, 1, 1, 1)
            kh, kw = wi.shape[2:]
            oh, ow = xi.shape[2] - kh + 1, xi.shape[3] - kw + 1
            acc = np.zeros((xi.shape[0], wi.shape[0], oh, ow), np.int64)
            for i in range(kh):
                for j in range(kw):
                    acc += np.einsum("nchw,oc->nohw", xi[:, :, i:i + oh, j:j + ow], wi[:, :, i, j])
            if len(a) > 8 and a[8] is not None:
                acc += a[8].astype(np.int64).reshape(1, -1, 1, 1)
            multiplier = (f32(sx) * np.asarray(sw, f32) / f32(sy)).reshape(1, -1, 1, 1)
            out = saturate(np.rint(acc.astype(f32) * multiplier) + np.int64(zy), zy)
        elif node.op_type == "QLinearAdd":
            qa, sa, za, qb, sb, zb, sc = a[:7]
            zc = a[7] if len(a) > 7 and a[7] is not None else np.zeros((), qa.dtype)
            out = quantize(dequantize(qa, sa, za) + dequantize(qb, sb, zb), sc, zc)
        elif node.op_type == "QLinearConcat":
            parts = [quantize(dequantize(*a[i:i + 3]), a[0], a[1]) for i in range(2, len(a), 3)]
            out = np.concatenate(parts, axis=attr["axis"])
        else:
            raise NotImplementedError(node.op_type)
        values[node.output[0]] = out
    return [values[o.name] for o in model.graph.output]


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

    def test_per_channel_prelu(self):
        """nn.PReLU(C)'s export: a [C,1,1] slope after a convolution."""
        rng = np.random.default_rng(21)
        inits = [weight(rng, "w", (4, 3, 3, 3)),
                 numpy_helper.from_array(np.array([0.25, -0.5, 2.0, 0.0], np.float32)
                                         .reshape(4, 1, 1), "slope")]
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                 helper.make_node("PRelu", ["c", "slope"], ["y"])]
        model = make_model(nodes, [("x", [1, 3, 7, 6])], ["y"], inits)
        feeds = [{"x": rng.standard_normal((1, 3, 7, 6)).astype(np.float32)} for _ in range(2)]
        self.compare(model, feeds)

    def test_prelu_slopes_that_are_not_per_channel(self):
        """PRelu slopes per element ([C,H,W]), along the width ([W]) and as an activation; on
        row-major tensors ONNX's node tests' shapes (slope [3,4,5] and [5] on x [3,4,5])."""
        rng = np.random.default_rng(22)
        for shape, slope_shape in (([1, 4, 5, 6], [4, 5, 6]), ([1, 4, 5, 6], [6]),
                                   ([3, 4, 5], [3, 4, 5]), ([3, 4, 5], [5])):
            with self.subTest(shape=shape, slope=slope_shape):
                inits = [weight(rng, "slope", slope_shape, scale=1.0)]
                nodes = [helper.make_node("Neg", ["x"], ["e"]),
                         helper.make_node("PRelu", ["e", "slope"], ["y"])]
                model = make_model(nodes, [("x", shape)], ["y"], inits)
                self.compare(model, [{"x": rng.standard_normal(shape).astype(np.float32)}])
        shape = [1, 3, 5, 4]  # the slope an activation (a sigmoid of another input)
        nodes = [helper.make_node("Sigmoid", ["s"], ["slope"]),
                 helper.make_node("PRelu", ["x", "slope"], ["y"])]
        model = make_model(nodes, [("x", shape), ("s", shape)], ["y"], [])
        self.compare(model, [{"x": rng.standard_normal(shape).astype(np.float32),
                              "s": rng.standard_normal(shape).astype(np.float32)}])

    def test_constant_operands_that_are_not_per_channel(self):
        """Element-wise operators with constants the passes cannot fold into a per-channel
        ScaleShift: a per-pixel mask [1,1,H,W], a per-element [C,H,W] bias, a row [W], a
        constant numerator (k / x), a constant first in Sub, Max with a [H,1] column; a Concat
        with a constant image; on an image after a convolution and on a row-major tensor."""
        rng = np.random.default_rng(23)
        c, h, w = 4, 6, 5
        inits = [weight(rng, "wc", (c, 3, 3, 3)), weight(rng, "mask", (1, 1, h, w), 1.0),
                 weight(rng, "bias", (c, h, w), 1.0), weight(rng, "row", (w,), 1.0),
                 numpy_helper.from_array((rng.random((1, c, h, w)) + 0.5).astype(np.float32), "num"),
                 weight(rng, "first", (1, c, 1, w), 1.0), weight(rng, "col", (h, 1), 1.0),
                 weight(rng, "extra", (1, 2, h, w), 1.0)]
        nodes = [helper.make_node("Conv", ["x", "wc"], ["a"], pads=[1, 1, 1, 1]),
                 helper.make_node("Mul", ["a", "mask"], ["b"]),
                 helper.make_node("Add", ["bias", "b"], ["d"]),
                 helper.make_node("Sub", ["d", "row"], ["e"]),
                 helper.make_node("Sigmoid", ["e"], ["f"]),
                 helper.make_node("Div", ["num", "f"], ["g"]),
                 helper.make_node("Sub", ["first", "g"], ["i"]),
                 helper.make_node("Max", ["i", "col"], ["j"]),
                 helper.make_node("Concat", ["j", "extra"], ["y"], axis=1)]
        model = make_model(nodes, [("x", [1, 3, h, w])], ["y"], inits)
        feeds = [{"x": rng.standard_normal((1, 3, h, w)).astype(np.float32)} for _ in range(2)]
        self.compare(model, feeds)
        inits = [weight(rng, "k", (3, 4, 5), 1.0), weight(rng, "r", (4, 1), 1.0)]
        nodes = [helper.make_node("Mul", ["x", "k"], ["m"]),
                 helper.make_node("Add", ["r", "m"], ["y"])]
        model = make_model(nodes, [("x", [3, 4, 5])], ["y"], inits)
        self.compare(model, [{"x": rng.standard_normal((3, 4, 5)).astype(np.float32)}])

    def test_gemm_with_transposed_a_and_matrix_c(self):
        """Gemm with transA (and transB, alpha, beta), a matrix C [M,N], a column C [M,1] and
        a per-column C, as whole tensors (A's rows are no batch): a 1x1 convolution over A^T."""
        rng = np.random.default_rng(24)
        m, k, n = 6, 20, 37
        cases = (
            (dict(transA=1), (k, m), (k, n), (1, n)),
            (dict(transA=1, transB=1, alpha=0.25, beta=0.35), (k, m), (n, k), (m, n)),
            (dict(), (m, k), (k, n), (m, n)),
            (dict(beta=-2.0), (m, k), (k, n), (m, 1)),
            (dict(transA=1), (k, m), (k, n), None),
        )
        for attrs, a_shape, b_shape, c_shape in cases:
            with self.subTest(attrs=attrs, c=c_shape):
                inits = [weight(rng, "b", b_shape)]
                inputs = ["a", "b"]
                if c_shape:
                    inits.append(weight(rng, "c", c_shape, 1.0))
                    inputs.append("c")
                nodes = [helper.make_node("Gemm", inputs, ["y"], **attrs)]
                model = make_model(nodes, [("a", list(a_shape))], ["y"], inits)
                self.compare(model, [{"a": rng.standard_normal(a_shape).astype(np.float32)}])

    def test_batched_matmul(self):
        """MatMul of rank-3 / rank-4 operands with a constant B, batch dimensions broadcast as
        ONNX (NumPy) defines: one grouped 1x1 convolution, a group per batch product."""
        rng = np.random.default_rng(25)
        cases = (((2, 3, 4), (2, 4, 3)), ((1, 2, 3, 4), (1, 2, 4, 3)), ((2, 5, 16), (16, 7)),
                 ((3, 4), (2, 4, 5)), ((1, 2, 3, 4), (2, 1, 4, 5)), ((2, 1, 6, 8), (3, 8, 2)),
                 ((1, 9, 32), (32, 24)))
        for a_shape, b_shape in cases:
            with self.subTest(a=a_shape, b=b_shape):
                nodes = [helper.make_node("MatMul", ["a", "b"], ["y"])]
                model = make_model(nodes, [("a", list(a_shape))], ["y"],
                                   [weight(rng, "b", b_shape, 1.0)])
                self.compare(model, [{"a": rng.standard_normal(a_shape).astype(np.float32)}])

    def test_matmul_of_two_activations(self):
        """MatMul of two activations (attention), batch dimensions broadcast: one native
        product per batch index on one cluster (per output column when the output is stored
        as an image), a fused Relu, and an attention block softmax(Q K^T) V."""
        rng = np.random.default_rng(26)
        cases = (((2, 3, 4), (2, 4, 5)), ((1, 2, 3, 4), (2, 1, 4, 5)), ((2, 3, 4), (4, 5)),
                 ((3, 4), (2, 4, 5)), ((2, 6), (6, 3)), ((1, 4, 8, 16), (1, 4, 16, 8)))
        for a_shape, b_shape in cases:
            with self.subTest(a=a_shape, b=b_shape):
                nodes = [helper.make_node("MatMul", ["a", "b"], ["p"]),
                         helper.make_node("Relu", ["p"], ["y"])]
                model = make_model(nodes, [("a", list(a_shape)), ("b", list(b_shape))], ["y"], [])
                self.compare(model, [{"a": rng.standard_normal(a_shape).astype(np.float32),
                                      "b": rng.standard_normal(b_shape).astype(np.float32)}])
        with self.subTest("attention"):
            shape = [1, 2, 8, 16]
            nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
                     helper.make_node("MatMul", ["q", "kt"], ["s"]),
                     helper.make_node("Softmax", ["s"], ["w"], axis=-1),
                     helper.make_node("MatMul", ["w", "v"], ["y"])]
            model = make_model(nodes, [("q", shape), ("k", shape), ("v", shape)], ["y"], [])
            self.compare(model, [{n: rng.standard_normal(shape).astype(np.float32)
                                  for n in ("q", "k", "v")}])

    def test_slices_with_negative_steps(self):
        """torch.flip's export (Slice, step -1) of an image's H and W, every other channel
        backwards, and a row-major tensor walked backwards with a step of -3."""
        rng = np.random.default_rng(8)

        def sliced(shape, starts, ends, axes, steps):
            inits = [numpy_helper.from_array(np.array(v, np.int64), k)
                     for k, v in (("starts", starts), ("ends", ends), ("axes", axes),
                                  ("steps", steps))]
            nodes = [helper.make_node("Relu", ["x"], ["r"]),
                     helper.make_node("Slice", ["r", "starts", "ends", "axes", "steps"], ["y"])]
            model = make_model(nodes, [("x", shape)], ["y"], inits)
            return model, [{"x": rng.standard_normal(shape).astype(np.float32)}]

        big = -(2 ** 63)
        self.compare(*sliced([1, 4, 6, 5], [-1, -1], [big, big], [2, 3], [-1, -1]))
        self.compare(*sliced([1, 6, 4, 5], [5], [big], [1], [-2]))
        self.compare(*sliced([7, 11], [9, 1], [0, 6], [1, 0], [-3, 2]))

    def test_softmax_over_other_axes(self):
        """Softmax / LogSoftmax (opset 13) over a middle or the first axis of a 3-D tensor and
        over the height and width of an image: transposed so the axis is last (an image's
        channels), and back."""
        rng = np.random.default_rng(13)
        for op, shape, axis in (("Softmax", [3, 4, 5], 1), ("LogSoftmax", [3, 4, 5], 0),
                                ("Softmax", [1, 3, 6, 5], 2), ("LogSoftmax", [1, 3, 6, 5], 3)):
            with self.subTest(op=op, axis=axis):
                model = make_model([helper.make_node(op, ["x"], ["y"], axis=axis)],
                                   [("x", shape)], ["y"], [])
                self.compare(model, [{"x": rng.standard_normal(shape).astype(np.float32)}])

    def compare_quantized(self, model, feeds_list, step, literal=None):
        """INT8 networks: kann's output within one quantization step (`step`, the output's
        scale) of ONNX Runtime's everywhere, and equal to `literal(feeds)` (the QDQ
        definition in NumPy) when given. ONNX Runtime's QLinearAdd kernel rounds
        (a - za) * (sa / sc) + (b - zb) * (sb / sc), not the definition's
        (sa * (a - za) + sb * (b - zb)) / sc: one step apart on some elements."""
        reference = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        for k in (1, 5):
            session = kann.Session(kann.compile(model, clusters=k))
            same = total = 0
            for feeds in feeds_list:
                got = session.run(None, feeds)
                for g, e in zip(got, reference.run(None, feeds)):
                    self.assertEqual(g.shape, e.shape)
                    np.testing.assert_allclose(g, e, atol=step * 1.001, rtol=0)
                    same += int(np.sum(g == e))
                    total += g.size
                if literal is not None:
                    np.testing.assert_array_equal(got[0], literal(feeds))
            print(f"  int8 on {k} cluster(s): {same} of {total} outputs equal to ORT's")

    def test_qlinear_add_concat_from_the_quantizer(self):
        """ONNX Runtime's quantize_static in QOperator format (QLinearConv, com.microsoft
        QLinearAdd and QLinearConcat, uint8 activations, int8 weights) of a network with a
        residual Add and a channel Concat: with 7-bit weights against ONNX Runtime and the
        definition; with full-range weights against the definition only (ONNX Runtime's
        convolution saturates on AVX2 hosts, see quantize_qoperator)."""
        rng = np.random.default_rng(3)
        inits = [weight(rng, "w1", (8, 3, 3, 3)), weight(rng, "b1", (8,), 0.1),
                 weight(rng, "w2", (8, 8, 3, 3)), weight(rng, "b2", (8,), 0.1),
                 weight(rng, "w3", (8, 8, 1, 1)), weight(rng, "b3", (8,), 0.1),
                 weight(rng, "w4", (6, 16, 3, 3)), weight(rng, "b4", (6,), 0.1)]
        nodes = [
            helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c1"], ["r1"]),
            helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c2"], ["r2"]),
            helper.make_node("Add", ["r1", "r2"], ["s"]),
            helper.make_node("Conv", ["s", "w3", "b3"], ["c3"]),
            helper.make_node("Relu", ["c3"], ["r3"]),
            helper.make_node("Concat", ["s", "r3"], ["cat"], axis=1),
            helper.make_node("Conv", ["cat", "w4", "b4"], ["y"], pads=[1, 1, 1, 1]),
        ]
        shape = (1, 3, 12, 10)
        float_model = make_model(nodes, [("x", list(shape))], ["y"], inits)
        samples = [rng.standard_normal(shape).astype(np.float32) for _ in range(8)]
        feeds = [{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(3)]
        for reduce_range in (True, False):
            quantized = quantize_qoperator(float_model, samples, reduce_range)
            ops = {(n.domain, n.op_type) for n in quantized.graph.node}
            self.assertIn(("com.microsoft", "QLinearAdd"), ops)
            self.assertIn(("com.microsoft", "QLinearConcat"), ops)
            widest = max(int(np.abs(numpy_helper.to_array(i).astype(np.int64)).max())
                         for i in quantized.graph.initializer if i.name.startswith("w")
                         and i.name.endswith("_quantized"))
            self.assertEqual(widest <= 64, reduce_range)

            def literal(f, quantized=quantized):
                return qoperator_definition(quantized, f)[0]

            if reduce_range:
                step = float([numpy_helper.to_array(i) for i in quantized.graph.initializer
                              if i.name == "y_scale"][0])
                self.compare_quantized(quantized.SerializeToString(), feeds, step, literal)
            else:
                for k in (1, 5):
                    session = kann.Session(kann.compile(quantized.SerializeToString(), clusters=k))
                    for f in feeds:
                        np.testing.assert_array_equal(session.run(None, f)[0], literal(f))

    def test_qlinear_unary_pool_and_mul_from_the_quantizer(self):
        """QOperator exports of LeakyRelu, AveragePool, a squeeze-and-excitation gate
        (GlobalAveragePool, Sigmoid, Mul): com.microsoft QLinearLeakyRelu, QLinearAveragePool,
        QLinearGlobalAveragePool, QLinearSigmoid and QLinearMul."""
        rng = np.random.default_rng(5)
        inits = [weight(rng, "w1", (8, 3, 3, 3)), weight(rng, "b1", (8,), 0.1),
                 weight(rng, "w2", (8, 8, 1, 1)), weight(rng, "b2", (8,), 0.1),
                 weight(rng, "w3", (4, 8, 3, 3)), weight(rng, "b3", (4,), 0.1)]
        nodes = [
            helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
            helper.make_node("LeakyRelu", ["c1"], ["r1"], alpha=0.1),
            helper.make_node("AveragePool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
            helper.make_node("GlobalAveragePool", ["p1"], ["g"]),
            helper.make_node("Conv", ["g", "w2", "b2"], ["gc"]),
            helper.make_node("Sigmoid", ["gc"], ["gate"]),
            helper.make_node("Mul", ["p1", "gate"], ["m"]),
            helper.make_node("Conv", ["m", "w3", "b3"], ["y"], pads=[1, 1, 1, 1]),
        ]
        shape = (1, 3, 12, 10)
        float_model = make_model(nodes, [("x", list(shape))], ["y"], inits)
        quantized = quantize_qoperator(float_model, [rng.standard_normal(shape).astype(np.float32)
                                                     for _ in range(8)])
        ops = {(n.domain, n.op_type) for n in quantized.graph.node}
        for op in ("QLinearLeakyRelu", "QLinearAveragePool", "QLinearGlobalAveragePool",
                   "QLinearSigmoid", "QLinearMul"):
            self.assertIn(("com.microsoft", op), ops)
        step = float([numpy_helper.to_array(i) for i in quantized.graph.initializer
                      if i.name == "y_scale"][0])
        feeds = [{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(3)]
        self.compare_quantized(quantized.SerializeToString(), feeds, step)

    def test_qlinear_add_concat_by_hand(self):
        """int8 activations, two network inputs, QLinearAdd without C_zero_point (0 of the
        operands' type), QLinearConcat of the sum and an operand that keeps its own
        quantization."""
        def const(name, value, dtype):
            return numpy_helper.from_array(np.array(value, dtype), name)

        inits = [const("s1", 0.02, np.float32), const("z1", 3, np.int8),
                 const("s2", 0.03, np.float32), const("z2", -5, np.int8),
                 const("sa", 0.04, np.float32), const("za", 0, np.int8),
                 const("sy", 0.05, np.float32), const("zy", 2, np.int8)]
        nodes = [
            helper.make_node("QuantizeLinear", ["x1", "s1", "z1"], ["q1"]),
            helper.make_node("QuantizeLinear", ["x2", "s2", "z2"], ["q2"]),
            helper.make_node("QLinearAdd", ["q1", "s1", "z1", "q2", "s2", "z2", "sa"], ["qa"],
                             domain="com.microsoft"),
            helper.make_node("QLinearConcat", ["sy", "zy", "qa", "sa", "za", "q1", "s1", "z1"],
                             ["qc"], axis=1, domain="com.microsoft"),
            helper.make_node("DequantizeLinear", ["qc", "sy", "zy"], ["y"]),
        ]
        graph = helper.make_graph(
            nodes, "qlinear",
            [helper.make_tensor_value_info("x1", TensorProto.FLOAT, [1, 4, 5, 6]),
             helper.make_tensor_value_info("x2", TensorProto.FLOAT, [1, 4, 5, 6])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 5, 6])], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                        helper.make_opsetid("com.microsoft", 1)])
        model.ir_version = 8
        rng = np.random.default_rng(9)
        feeds = [{"x1": rng.standard_normal((1, 4, 5, 6)).astype(np.float32) * 2,
                  "x2": rng.standard_normal((1, 4, 5, 6)).astype(np.float32) * 2}
                 for _ in range(3)]

        def quantize(x, scale, zero):
            return np.clip(np.rint(x / np.float32(scale)) + zero, -128, 127)

        def dequantize(q, scale, zero):
            return (q - zero).astype(np.float32) * np.float32(scale)

        def literal(feeds):
            q1 = quantize(feeds["x1"], 0.02, 3)
            q2 = quantize(feeds["x2"], 0.03, -5)
            qa = quantize(dequantize(q1, 0.02, 3) + dequantize(q2, 0.03, -5), 0.04, 0)
            qc = np.concatenate([quantize(dequantize(qa, 0.04, 0), 0.05, 2),
                                 quantize(dequantize(q1, 0.02, 3), 0.05, 2)], axis=1)
            return dequantize(qc, 0.05, 2)

        self.compare_quantized(model.SerializeToString(), feeds, 0.05, literal)
        # The contrib operators exist in com.microsoft only; a malformed one is one line.
        model.graph.node[2].domain = ""
        with self.assertRaisesRegex(kann.Error, "QLinearAdd.*unsupported operator"):
            kann.compile(model.SerializeToString(), clusters=1)
        model.graph.node[2].domain = "com.microsoft"
        del model.graph.node[3].attribute[:]
        with self.assertRaisesRegex(kann.Error, "QLinearConcat.*the axis attribute is required"):
            kann.compile(model.SerializeToString(), clusters=1)

    def test_int8_calibration_of_two_inputs(self):
        """Post-training INT8 of a two-input float model, calibrated with a dict {input name:
        samples} (a list of arrays adds up): within 3 % of the output range of ONNX Runtime's
        FP32 result; an array without an input name is a ValueError naming the inputs."""
        rng = np.random.default_rng(4)
        inits = [weight(rng, "wa", (6, 3, 3, 3)), weight(rng, "wb", (6, 3, 3, 3)),
                 weight(rng, "bias", (6,), 0.1)]
        nodes = [helper.make_node("Conv", ["a", "wa", "bias"], ["ca"], pads=[1, 1, 1, 1]),
                 helper.make_node("Conv", ["b", "wb"], ["cb"], pads=[1, 1, 1, 1]),
                 helper.make_node("Add", ["ca", "cb"], ["s"]),
                 helper.make_node("Relu", ["s"], ["y"])]
        shape = [1, 3, 8, 8]
        model = make_model(nodes, [("a", shape), ("b", shape)], ["y"], inits)
        a = rng.standard_normal((16, 3, 8, 8)).astype(np.float32)
        b = 2 * rng.standard_normal((16, 3, 8, 8)).astype(np.float32)
        reference = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        session = kann.Session(kann.compile(model, clusters=2, precision="int8",
                                            calibration={"a": a, "b": [b[:6], b[6:]]}))
        for i in range(3):
            feeds = {"a": a[i:i + 1], "b": b[i:i + 1]}
            (expected,) = reference.run(None, feeds)
            (got,) = session.run(None, feeds)
            error = float(np.abs(got - expected).max())
            print(f"  int8 sample {i}: max |kann - ORT FP32| {error:.3g} of {expected.max():.3g}")
            self.assertLess(error, 0.03 * float(expected.max()))
        with self.assertRaisesRegex(ValueError, "names no input, and the model has 2 \\('a', 'b'\\)"):
            kann.compile(model, clusters=1, precision="int8", calibration=a)
        with self.assertRaisesRegex(ValueError, "input 'b' has 6 samples, input 'a' 16"):
            kann.compile(model, clusters=1, precision="int8", calibration={"a": a, "b": b[:6]})


if __name__ == "__main__":
    unittest.main(verbosity=2)
