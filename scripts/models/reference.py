#!/usr/bin/python3
"""Runs an ONNX model with ONNX Runtime (the test-only reference) on .npy inputs.

Needs the venv (scripts/setup-venv.sh); when onnxruntime is not importable it re-runs itself
with <repo>/.venv/bin/python:

  scripts/models/reference.py MODEL.onnx --input X.npy [--input NAME=Y.npy]
      [--output-dir DIR] [--threads N] [--compare REF_DIR [--atol A]] [--iterations N]

Inputs: `--input FILE` binds the model's inputs in order; `--input NAME=FILE` binds by name.
Each array must have the model's input shape, or be a stack of samples [S, *shape] whose
leading dimension replaces a batch dimension of 1 (e.g. test_inputs.npy [360,1,8,8] for a
model taking [1,1,8,8]): the model then runs once per sample, and each output is the
concatenation of the per-sample outputs along axis 0 ([360,10] for a [1,10] output).

Outputs: one `<output name>.npy` per model output in --output-dir (default: the current
directory), the same convention as `kann run --output-dir` (characters other than letters,
digits, '.', '-' and '_' in the name become '_').

--compare REF_DIR: for each output, loads REF_DIR/<output name>.npy (for instance the PyTorch
outputs that export_cnns.py writes) and prints the max abs diff and the max abs diff relative
to max |ref|; with --atol, exits 1 when a max abs diff exceeds it.
--iterations N: also times N more runs (after the first) and prints mean and min latency.
Execution: ORT's CPU provider, intra-op threads = --threads (default 1), inter-op 1,
sequential; graph optimizations at ORT's default level (--no-optimizations to disable).
"""
import argparse
import os
import re
import sys
import time

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


def safe_name(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def main():
    _reexec_in_venv()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("model")
    p.add_argument("--input", action="append", default=[], metavar="[NAME=]FILE.npy")
    p.add_argument("--output-dir", default=".")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--compare", metavar="REF_DIR")
    p.add_argument("--atol", type=float)
    p.add_argument("--iterations", type=int, default=0)
    p.add_argument("--no-optimizations", action="store_true")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args()

    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if args.no_optimizations:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
    model_inputs = sess.get_inputs()
    if len(args.input) != len(model_inputs):
        sys.exit(f"reference.py: the model has {len(model_inputs)} input(s) "
                 f"({', '.join(i.name for i in model_inputs)}); {len(args.input)} given")

    np_types = {"tensor(float)": np.float32, "tensor(float16)": np.float16,
                "tensor(double)": np.float64, "tensor(int8)": np.int8,
                "tensor(uint8)": np.uint8, "tensor(int32)": np.int32,
                "tensor(int64)": np.int64, "tensor(bool)": np.bool_}
    feeds, samples = {}, None
    for k, spec in enumerate(args.input):
        name, path = spec.split("=", 1) if "=" in spec and not os.path.exists(spec) else \
            (model_inputs[k].name, spec)
        info = next((i for i in model_inputs if i.name == name), None)
        if info is None:
            sys.exit(f"reference.py: the model has no input named {name!r}")
        arr = np.load(path)
        want = np_types.get(info.type)
        if want is not None and arr.dtype != want:
            sys.exit(f"reference.py: {path} is {arr.dtype}, input {name!r} wants {info.type}")
        shape = list(info.shape)
        if any(not isinstance(d, int) for d in shape):
            sys.exit(f"reference.py: input {name!r} has a dynamic shape {shape}")
        if list(arr.shape) == shape:
            n = None
        elif shape and shape[0] == 1 and list(arr.shape[1:]) == shape[1:]:
            n = arr.shape[0]
        else:
            sys.exit(f"reference.py: {path} has shape {list(arr.shape)}, input {name!r} wants "
                     f"{shape} (or [S, {', '.join(map(str, shape[1:]))}] for S samples)")
        if n is not None:
            if samples is not None and samples != n:
                sys.exit("reference.py: stacked inputs with different sample counts")
            samples = n
        feeds[name] = (arr, n is not None)

    def feed(i):
        return {k: (a[i:i + 1] if stacked else a) for k, (a, stacked) in feeds.items()}

    out_names = [o.name for o in sess.get_outputs()]
    if samples is None:
        outs = sess.run(None, feed(0))
    else:
        per = [sess.run(None, feed(i)) for i in range(samples)]
        outs = [np.concatenate([r[j] for r in per]) for j in range(len(out_names))]

    os.makedirs(args.output_dir, exist_ok=True)
    for name, arr in zip(out_names, outs):
        np.save(os.path.join(args.output_dir, safe_name(name) + ".npy"), arr)
        if not args.quiet:
            print(f"reference.py: {name} {list(arr.shape)} {arr.dtype} -> "
                  f"{os.path.join(args.output_dir, safe_name(name) + '.npy')}")

    if args.iterations > 0:
        times = []
        for _ in range(args.iterations):
            t = time.perf_counter()
            sess.run(None, feed(0))
            times.append(time.perf_counter() - t)
        print(f"reference.py: latency median {1e3 * np.median(times):.3f} ms, mean {1e3 * np.mean(times):.3f} ms, min "
              f"{1e3 * np.min(times):.3f} ms over {args.iterations} runs, {args.threads} "
              f"thread(s), onnxruntime {ort.__version__}")

    status = 0
    if args.compare:
        for name, arr in zip(out_names, outs):
            ref_path = os.path.join(args.compare, safe_name(name) + ".npy")
            ref = np.load(ref_path)
            if ref.shape != arr.shape:
                print(f"reference.py: {name}: shape {list(arr.shape)} vs reference "
                      f"{list(ref.shape)}")
                status = 1
                continue
            diff = float(np.abs(arr.astype(np.float64) - ref.astype(np.float64)).max())
            scale = float(np.abs(ref).max())
            bad = args.atol is not None and diff > args.atol
            print(f"reference.py: {name}: max abs diff {diff:.3g} (max |ref| {scale:.3g}, "
                  f"relative {diff / scale if scale else 0.0:.3g})"
                  + (f" > atol {args.atol}" if bad else ""))
            status |= int(bad)
    sys.exit(status)


if __name__ == "__main__":
    main()
