"""The kann Python package: compile, save/load, Session.run in ONNX Runtime's convention, errors,
timings, INT8 calibration, and concurrent sessions on sub-devices from Python threads.

Run by ctest with Debian's /usr/bin/python3 (python3-numpy, python3-onnx), PYTHONPATH naming
the build tree's python/ folder and OCL_ICD_VENDORS its vendors/ folder.
"""
import os
import sys
import tempfile
import threading
import time
import unittest

import numpy as np

import kann

DIGITS = os.environ["KANN_DIGITS_DIR"]
MODEL = os.path.join(DIGITS, "model.onnx")
INPUTS = np.load(os.path.join(DIGITS, "test_inputs.npy"))  # (360, 1, 8, 8), preprocessed
REFERENCE = np.load(os.path.join(DIGITS, "reference_logits.npy"))  # PyTorch's logits
LABELS = np.load(os.path.join(DIGITS, "test_labels.npy"))


class CompileAndRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.net = kann.compile(MODEL, clusters=1)

    def test_version_is_the_projects(self):
        self.assertRegex(kann.__version__, r"^\d+\.\d+\.\d+$")
        self.assertEqual(kann.__version__, os.environ["KANN_VERSION"])

    def test_network_describes_its_tensors(self):
        net = self.net
        self.assertEqual(net.clusters, 1)
        self.assertEqual(net.device_config, "mppa3")
        self.assertEqual([(t.name, t.shape, t.dtype) for t in net.inputs],
                         [("input", (1, 1, 8, 8), "float32")])
        self.assertEqual([(t.name, t.shape) for t in net.outputs], [("logits", (1, 10))])
        self.assertEqual([op["op"] for op in net.report["ops"]],
                         ["Conv+act", "Conv+act", "MaxPool", "Gemm+act", "Gemm"])

    def test_run_matches_the_framework(self):
        session = kann.Session(self.net)
        (logits,) = session.run(None, {"input": INPUTS[:1]})
        self.assertEqual(logits.shape, (1, 10))
        self.assertEqual(logits.dtype, np.float32)
        np.testing.assert_allclose(logits, REFERENCE[:1], atol=1e-4, rtol=1e-4)
        self.assertEqual(session.samples, 1)
        self.assertGreater(session.modeled_seconds, 0)
        self.assertGreater(session.modeled_cycles, 0)
        self.assertGreater(session.host_seconds, 0)
        # A float64 array is converted, as ONNX Runtime would refuse but NumPy users expect.
        (again,) = session.run(["logits"], {"input": INPUTS[:1].astype(np.float64)})
        np.testing.assert_array_equal(again, logits)

    def test_stacked_samples_run_one_by_one(self):
        session = kann.Session(self.net, sub_device=3)
        self.assertEqual(session.sub_device, 3)
        (logits,) = session.run(["logits"], {"input": INPUTS})
        self.assertEqual(logits.shape, (360, 10))
        np.testing.assert_allclose(logits, REFERENCE, atol=1e-4, rtol=1e-4)
        self.assertEqual((logits.argmax(1) == LABELS).sum(), 354)  # PyTorch's 0.983333
        self.assertEqual(session.samples, 360)
        one = kann.Session(self.net)
        one.run(None, {"input": INPUTS[:1]})
        # Modeled time adds up per sample (the same network, the same modeled cost each time).
        self.assertAlmostEqual(session.modeled_seconds, 360 * one.modeled_seconds,
                               delta=0.05 * session.modeled_seconds)

    def test_save_load_and_bytes_round_trip(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "digits.kbin")
            self.net.save(path)
            loaded = kann.load(path)
            self.assertEqual(loaded.to_bytes(), self.net.to_bytes())
            from_path = kann.Session(path)  # a session also takes the .kbin path
            (a,) = from_path.run(None, {"input": INPUTS[:2]})
        (b,) = kann.Session(kann.Network(self.net.to_bytes())).run(None, {"input": INPUTS[:2]})
        np.testing.assert_array_equal(a, b)

    def test_compile_takes_a_model_proto_and_bytes(self):
        import onnx
        proto = onnx.load(MODEL)
        for model in (proto, proto.SerializeToString()):
            net = kann.compile(model, clusters=5, precision="fp16")
            self.assertEqual(net.clusters, 5)
            # binary16 weights: half the FP32 parameter bytes (within panel padding)
            fp32 = kann.compile(MODEL, clusters=5).report["params_bytes"]
            self.assertLess(net.report["params_bytes"], 0.6 * fp32)
            (logits,) = kann.Session(net).run(None, {"input": INPUTS[:8]})
            np.testing.assert_allclose(logits, REFERENCE[:8], atol=2e-2, rtol=2e-2)

    def test_int8_with_calibration(self):
        net = kann.compile(MODEL, clusters=1, precision="int8", calibration=INPUTS[:64])
        ops = [op["op"] for op in net.report["ops"]]
        self.assertEqual((ops[0], ops[-1]), ("QuantizeLinear", "DequantizeLinear"))
        fp32 = kann.compile(MODEL, clusters=1).report["params_bytes"]
        self.assertLess(net.report["params_bytes"], 0.6 * fp32)  # int8 weights, int32 biases
        (logits,) = kann.Session(net).run(None, {"input": INPUTS})
        self.assertGreaterEqual((logits.argmax(1) == LABELS).mean(), 0.98)


    def test_batch_runs_every_image_as_batch_one_runs_do(self):
        # batch=N: the network takes N images at once; the same bytes as N batch-1 runs on the
        # same cluster count, whichever split the compiler chooses.
        one = kann.Session(kann.compile(MODEL, clusters=5))
        (want,) = one.run(None, {"input": INPUTS[:5]})
        for split in ("auto", "sequential", "clusters", "clusters:2"):
            net = kann.compile(MODEL, batch=5, batch_split=split)
            self.assertEqual(net.inputs[0].shape, (5, 1, 8, 8))
            self.assertEqual(net.outputs[0].shape, (5, 10))
            self.assertEqual(sorted(i for g in net.report["batch"]["groups"] for i in g["images"]),
                             list(range(5)))
            (got,) = kann.Session(net).run(None, {"input": INPUTS[:5]})
            np.testing.assert_array_equal(got, want, err_msg=split)
        with self.assertRaises(ValueError):
            kann.compile(MODEL, batch=5, batch_split="diagonal")
        with self.assertRaises(TypeError):
            kann.compile(MODEL, batch="5")


    def test_schedules_give_the_same_bytes(self):
        # schedule="layer" | "pipeline" | "group" | "auto": when parameters load, how
        # convolutions split and which rows a call computes change, not the arithmetic; auto
        # keeps the fastest by the compiler's replay.
        want = None
        for schedule in ("layer", "pipeline", "group", "auto"):
            net = kann.compile(MODEL, clusters=2, schedule=schedule)
            self.assertIn(net.report["schedule"]["chosen"], ("layer", "pipeline", "group"))
            (got,) = kann.Session(net).run(None, {"input": INPUTS[:4]})
            if want is None:
                want = got
            np.testing.assert_array_equal(got, want, err_msg=schedule)
        auto = kann.compile(MODEL, clusters=2).report
        self.assertLessEqual(auto["modeled_cycles"], auto["schedule"]["layer_cycles"])
        with self.assertRaises(ValueError):
            kann.compile(MODEL, schedule="columns")


    def test_winograd_and_residual_fusion_options(self):
        # winograd="auto" | "all" | "off" and residual_fusion=True | False: the compiler's
        # choices of convolution algorithm and Add fusion; results within FP32 rounding.
        want = None
        for winograd in ("off", "all", "auto"):
            for fusion in (True, False):
                net = kann.compile(MODEL, clusters=2, winograd=winograd, residual_fusion=fusion)
                (got,) = kann.Session(net).run(None, {"input": INPUTS[:4]})
                if want is None:
                    want = got
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5,
                                           err_msg=f"{winograd} {fusion}")
        with self.assertRaises(ValueError):
            kann.compile(MODEL, winograd="sometimes")


class Errors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.net = kann.compile(MODEL, clusters=1)
        cls.session = kann.Session(cls.net)

    def test_names_are_checked(self):
        with self.assertRaisesRegex(ValueError, r"unknown output 'probs'.*'logits' \(1, 10\)"):
            self.session.run(["probs"], {"input": INPUTS[:1]})
        with self.assertRaisesRegex(ValueError, r"unknown input 'x'.*'input' \(1, 1, 8, 8\)"):
            self.session.run(None, {"x": INPUTS[:1]})
        with self.assertRaisesRegex(ValueError, r"missing input 'input'"):
            self.session.run(None, {})
        with self.assertRaisesRegex(TypeError, "list of names"):
            self.session.run("logits", {"input": INPUTS[:1]})

    def test_shapes_and_types_are_checked(self):
        for shape in [(64,), (8, 8), (1, 64), (1, 8, 8, 1)]:
            with self.assertRaisesRegex(ValueError, r"does not match the input's shape \(1, 1, 8, 8\)"):
                self.session.run(None, {"input": np.zeros(shape, np.float32)})
        with self.assertRaises(TypeError):
            self.session.run(None, {"input": "pixels"})
        with self.assertRaises(TypeError):
            self.session.run(None, [INPUTS[:1]])

    def test_compile_errors(self):
        with self.assertRaisesRegex(kann.Error, "not a valid ONNX model"):
            kann.compile(os.path.join(DIGITS, "meta.json"))
        with self.assertRaisesRegex(kann.Error, "cannot open|No such file|cannot read"):
            kann.compile("/nonexistent.onnx")
        with self.assertRaisesRegex(ValueError, r"clusters must be 1..5"):
            kann.compile(MODEL, clusters=6)
        with self.assertRaisesRegex(ValueError, "precision"):
            kann.compile(MODEL, precision="int4")
        with self.assertRaisesRegex(ValueError, "needs calibration data"):
            kann.compile(MODEL, precision="int8")
        with self.assertRaisesRegex(ValueError, "only used with precision='int8'"):
            kann.compile(MODEL, calibration=INPUTS[:4])
        with self.assertRaisesRegex(ValueError, "device_config"):
            kann.compile(MODEL, device_config="nosuchpreset")
        with self.assertRaises(TypeError):
            kann.compile(3.5)

    def test_mixed_precision(self):
        """fp16_tolerance keeps in float32 the activation whose binary16 storage ruins the
        outputs (x + 2048 then - 2048: binary16's spacing at 2048 is 2, so x is lost), chosen
        on calibration samples and checked on another input; fp32_operators names them."""
        from onnx import TensorProto, helper, numpy_helper
        inits = [numpy_helper.from_array(np.eye(4, dtype=np.float32).reshape(4, 4, 1, 1), "w"),
                 numpy_helper.from_array(np.full(4, 2048, np.float32), "up"),
                 numpy_helper.from_array(np.full(4, -2048, np.float32), "down")]
        nodes = [helper.make_node("Conv", ["x", "w", "up"], ["lifted"], name="lift"),
                 helper.make_node("Conv", ["lifted", "w", "down"], ["y"], name="back")]
        graph = helper.make_graph(
            nodes, "cancel", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        rng = np.random.default_rng(3)
        calibration = rng.uniform(-1, 1, (2, 4, 6, 6)).astype(np.float32)
        x = rng.uniform(-1, 1, (1, 4, 6, 6)).astype(np.float32)

        def run(**kwargs):
            net = kann.compile(model, clusters=1, precision="fp16", **kwargs)
            return kann.Session(net).run(None, {"x": x})[0]

        self.assertGreater(np.abs(run() - x).max(), 0.1)  # all binary16: x is lost
        np.testing.assert_allclose(run(fp16_tolerance=0.02, calibration=calibration), x,
                                   atol=0.02, rtol=0.02)
        np.testing.assert_allclose(run(fp32_operators=["lift", "back"]), x, atol=0.02, rtol=0.02)
        with self.assertRaisesRegex(ValueError, "needs precision='fp16'"):
            kann.compile(model, fp16_tolerance=0.02, calibration=calibration)
        with self.assertRaisesRegex(ValueError, "calibration data"):
            kann.compile(model, precision="fp16", fp16_tolerance=0.02)
        with self.assertRaisesRegex(kann.Error, "float32 operator 'nope'"):
            kann.compile(model, precision="fp16", fp32_operators=["nope"])

    def test_device_errors(self):
        with self.assertRaisesRegex(ValueError, r"sub_device 5 does not exist.*\(0..4\)"):
            kann.Session(self.net, sub_device=5)
        with self.assertRaisesRegex(ValueError, "device 7 does not exist"):
            kann.Session(self.net, device=7)
        with self.assertRaisesRegex(kann.Error, "not a valid kann binary"):
            kann.Session(b"not a kbin")
        self.assertTrue(issubclass(kann.Error, RuntimeError))


class ConcurrentSubDevices(unittest.TestCase):
    def test_threads_on_five_sub_devices_match_sequential_results(self):
        net = kann.compile(MODEL, clusters=1)
        sessions = [kann.Session(net, sub_device=k) for k in range(5)]
        self.assertEqual(len({s.device_name for s in sessions}), 1)
        chunks = np.array_split(INPUTS, 5)
        sequential = [sessions[0].run(None, {"input": c})[0] for c in chunks]
        results = [None] * 5
        errors = []

        def work(k):
            try:
                results[k] = sessions[k].run(None, {"input": chunks[k]})[0]
            except Exception as e:  # reported below, in the main thread
                errors.append(e)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        for k in range(5):
            np.testing.assert_array_equal(results[k], sequential[k])
        np.testing.assert_allclose(np.concatenate(results), REFERENCE, atol=1e-4, rtol=1e-4)

    def test_the_gil_is_released_while_the_device_runs(self):
        session = kann.Session(kann.compile(MODEL, clusters=1), sub_device=1)
        inputs = np.concatenate([INPUTS] * 2)  # a run long enough to observe
        count = [0]
        stop = threading.Event()

        def spin():  # pure Python: advances only while it holds the GIL
            while not stop.is_set():
                count[0] += 1
                if count[0] % 100 == 0:
                    time.sleep(0)  # lets the main thread take the GIL back

        # No forced switches between bytecodes (30 s interval): the spinner runs during the
        # call only if run() releases the GIL. A C loop holding it (sum(range(...))) leaves
        # the count where it was.
        interval = sys.getswitchinterval()
        sys.setswitchinterval(30)
        try:
            spinner = threading.Thread(target=spin)
            spinner.start()
            before = count[0]
            session.run(None, {"input": inputs})
            during = count[0] - before
            stop.set()
            spinner.join()
        finally:
            sys.setswitchinterval(interval)
        self.assertEqual(session.samples, 720)
        self.assertGreater(during, 1000)


if __name__ == "__main__":
    unittest.main(verbosity=2)
