#!/usr/bin/python3
"""Checks the digits model with ONNX Runtime and makes its QDQ INT8 version.

Runs in the test-only venv (scripts/setup-venv.sh), which has onnxruntime and its quantization
tool (it re-runs itself with <repo>/.venv/bin/python when onnxruntime is not importable):
`scripts/models/quantize_digits.py [--dir examples/models/digits]`.
train_digits.py runs it automatically when the venv exists. It

  1. runs model.onnx with ONNX Runtime on test_inputs.npy and records, in meta.json
     ("onnxruntime"), the max abs diff with PyTorch's reference_logits.npy and ORT's accuracy;
  2. quantizes model.onnx with onnxruntime.quantization.quantize_static: QDQ format, signed
     INT8 activations (asymmetric, MinMax calibration on 256 samples of the *training* split,
     recomputed from meta.json's split) and INT8 weights (symmetric, per output channel),
     INT32 biases -> model_int8.onnx;
  3. runs model_int8.onnx with ONNX Runtime on the test set -> reference_logits_int8.npy, and
     records its accuracy and the diff with the float logits in meta.json ("int8").
"""
import argparse
import json
import os
import shlex
import sys
import tempfile

import numpy as np


def _reexec_in_venv():
    """Re-runs this script with <repo>/.venv/bin/python when onnxruntime is not importable."""
    try:
        import onnxruntime  # noqa: F401
        return
    except ImportError:
        pass
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    venv_python = os.path.join(root, ".venv", "bin", "python")
    if os.path.exists(venv_python) and os.path.realpath(sys.prefix) != os.path.realpath(
            os.path.join(root, ".venv")):
        os.execv(venv_python, [venv_python, os.path.abspath(__file__)] + sys.argv[1:])
    sys.exit(f"{os.path.basename(__file__)}: onnxruntime is not importable; run "
             "scripts/setup-venv.sh (or use .venv/bin/python)")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def run_ort(path, inputs, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return np.concatenate([sess.run(None, {name: inputs[i:i + 1]})[0]
                           for i in range(len(inputs))]).astype(np.float32)


def main():
    _reexec_in_venv()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dir", default=os.path.join(ROOT, "examples", "models", "digits"))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--calibration-samples", type=int, default=256)
    args = p.parse_args()

    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat,
                                          QuantType, quantize_static)

    d = args.dir
    meta_path = os.path.join(d, "meta.json")
    with open(meta_path) as f:
        meta = json.load(f)
    x_test = np.load(os.path.join(d, "test_inputs.npy"))
    y_test = np.load(os.path.join(d, "test_labels.npy"))
    ref = np.load(os.path.join(d, "reference_logits.npy"))

    # 1. ONNX Runtime vs PyTorch on the float model.
    fp = run_ort(os.path.join(d, "model.onnx"), x_test, args.threads)
    diff = float(np.abs(fp - ref).max())
    fp_acc = float((fp.argmax(1) == y_test).mean())
    same_pred = int((fp.argmax(1) == ref.argmax(1)).sum())
    meta["onnxruntime"] = {"version": ort.__version__, "max_abs_diff_vs_reference": diff,
                           "accuracy": fp_acc, "same_predictions": same_pred}
    print(f"quantize_digits: ONNX Runtime {ort.__version__} vs PyTorch: max abs diff {diff:.3g}, "
          f"accuracy {fp_acc:.6f}, same predictions {same_pred}/{len(y_test)}")

    # 2. Calibration data: the training split, recomputed exactly as train_digits.py made it.
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    digits = load_digits()
    x = (digits.data.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
    split = meta["split"]
    x_train, x_chk, _, _ = train_test_split(x, digits.target, test_size=split["test_size"],
                                            random_state=split["random_state"],
                                            stratify=digits.target)
    if not np.array_equal(np.ascontiguousarray(x_chk, dtype=np.float32), x_test):
        sys.exit("quantize_digits: the recomputed split does not match test_inputs.npy")
    calib = x_train[:args.calibration_samples]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.i = 0

        def get_next(self):
            if self.i >= len(calib):
                return None
            self.i += 1
            return {"input": np.ascontiguousarray(calib[self.i - 1:self.i])}

    int8_path = os.path.join(d, "model_int8.onnx")
    with tempfile.TemporaryDirectory() as tmp:
        # ORT's recommended pre-processing (shape inference) before static quantization.
        from onnxruntime.quantization.shape_inference import quant_pre_process
        pre = os.path.join(tmp, "pre.onnx")
        quant_pre_process(os.path.join(d, "model.onnx"), pre, skip_optimization=True)
        quantize_static(pre, int8_path, Reader(), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        per_channel=True, calibrate_method=CalibrationMethod.MinMax)
    m = onnx.load(int8_path)
    onnx.checker.check_model(m, full_check=True)
    m.doc_string = ("ManyCL digits classifier, QDQ INT8 (onnxruntime.quantization."
                    "quantize_static, MinMax calibration), made by "
                    "scripts/models/quantize_digits.py from model.onnx")
    onnx.save(m, int8_path)
    ops = sorted({n.op_type for n in m.graph.node})

    # 3. The INT8 model's logits, as ONNX Runtime computes them.
    q = run_ort(int8_path, x_test, args.threads)
    np.save(os.path.join(d, "reference_logits_int8.npy"), q)
    q_acc = float((q.argmax(1) == y_test).mean())
    q_diff = float(np.abs(q - ref).max())
    argv = [os.path.relpath(os.path.abspath(__file__), ROOT)] + [
        os.path.relpath(a, ROOT) if os.path.isabs(a) else a for a in sys.argv[1:]]
    meta["int8"] = {
        "model": "model_int8.onnx",
        "reference_logits": "reference_logits_int8.npy",
        "command": ".venv/bin/python " + " ".join(shlex.quote(a) for a in argv),
        "tool": f"onnxruntime.quantization.quantize_static (onnxruntime {ort.__version__}, "
                f"onnx {onnx.__version__})",
        "format": "QDQ; activations int8 asymmetric (MinMax, "
                  f"{len(calib)} training samples); weights int8 symmetric per channel; "
                  "biases int32",
        "opset": int(max(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))),
        "operators": ops,
        "accuracy_onnxruntime": q_acc,
        "correct_onnxruntime": int((q.argmax(1) == y_test).sum()),
        "max_abs_diff_vs_float_reference": q_diff,
        "same_predictions_as_float": int((q.argmax(1) == ref.argmax(1)).sum()),
    }
    print(f"quantize_digits: INT8 (ONNX Runtime) accuracy {q_acc:.6f}, max abs diff vs float "
          f"{q_diff:.3g}, operators {ops}")
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
