#!/usr/bin/python3
"""Accuracy of ManyCL's outputs on the bundled digits test set, vs the framework's.

  scripts/models/digits_accuracy.py OUTPUTS_DIR [--bundle examples/models/digits] [--int8]
                                    [--output-name logits] [--atol A] [--json]
  scripts/models/digits_accuracy.py --write-inputs INPUTS_DIR [--bundle ...]

OUTPUT CONVENTION. The bundle's test set is test_inputs.npy, [N,1,8,8] float32 (N = 360),
sample i = test_inputs[i]; the model (batch 1) has one output named "logits", [1,10] float32,
and `kann run --output-dir DIR` writes it as DIR/logits.npy. OUTPUTS_DIR holds either

  (a) batched:    OUTPUTS_DIR/logits.npy, shape [N,10] or [N,1,10], row i = sample i; or
  (b) per sample: OUTPUTS_DIR/<i>/logits.npy, shape [1,10] or [10], for every i in 0..N-1
                  (<i> in decimal, zero padding allowed: 0, 7, 0042, ...) -- what running
                  `kann run model.kbin --input INPUTS_DIR/<i>.npy --output-dir OUTPUTS_DIR/<i>`
                  for each sample produces.

(a) is used when OUTPUTS_DIR/logits.npy exists, (b) otherwise. Other files are ignored.
--output-name changes "logits". --write-inputs INPUTS_DIR writes the per-sample inputs for
(b): INPUTS_DIR/0000.npy ... INPUTS_DIR/0359.npy, each [1,1,8,8] float32.

It prints the accuracy, the framework's accuracy (meta.json "accuracy": PyTorch's), the max
abs diff with reference_logits.npy and how many predictions differ from the framework's.
With --int8 the references are those of the QDQ INT8 model (reference_logits_int8.npy and
meta.json "int8"."accuracy_onnxruntime": ONNX Runtime's INT8 execution).

Exit status: 0 when the accuracy equals the framework's (and, with --atol, the max abs diff
is <= A); 1 when it differs (or the diff exceeds A); 2 when the outputs are missing or
malformed. --json prints one JSON object instead of the text lines.
"""
import argparse
import json
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def fail(msg):
    print(f"digits_accuracy: {msg}", file=sys.stderr)
    sys.exit(2)


def load_outputs(out_dir, name, n):
    batched = os.path.join(out_dir, name + ".npy")
    if os.path.exists(batched):
        a = np.load(batched)
        if a.ndim == 3 and a.shape[1] == 1:
            a = a[:, 0, :]
        if a.shape != (n, 10):
            fail(f"{batched} has shape {list(a.shape)}; expected [{n},10] or [{n},1,10]")
        return a, "batched"
    if not os.path.isdir(out_dir):
        fail(f"{out_dir} is not a directory")
    rows = {}
    for entry in os.listdir(out_dir):
        if re.fullmatch(r"\d+", entry) and os.path.isdir(os.path.join(out_dir, entry)):
            f = os.path.join(out_dir, entry, name + ".npy")
            if os.path.exists(f):
                i = int(entry)
                if i in rows:
                    fail(f"sample {i} appears twice in {out_dir}")
                rows[i] = f
    if not rows:
        fail(f"no {name}.npy in {out_dir} nor in numbered sub-folders of it")
    missing = [i for i in range(n) if i not in rows]
    extra = sorted(i for i in rows if i >= n)
    if missing or extra:
        fail(f"per-sample outputs: {len(missing)} of {n} missing (first: "
             f"{missing[:5]}), {len(extra)} beyond the test set {extra[:5]}")
    out = np.empty((n, 10), dtype=np.float32)
    for i in range(n):
        a = np.load(rows[i])
        if a.size != 10 or a.shape not in ((1, 10), (10,)):
            fail(f"{rows[i]} has shape {list(a.shape)}; expected [1,10] or [10]")
        out[i] = a.reshape(10)
    return out, "per-sample"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("outputs_dir", nargs="?")
    p.add_argument("--bundle", default=os.path.join(ROOT, "examples", "models", "digits"))
    p.add_argument("--int8", action="store_true")
    p.add_argument("--output-name", default="logits")
    p.add_argument("--atol", type=float)
    p.add_argument("--json", action="store_true")
    p.add_argument("--write-inputs", metavar="INPUTS_DIR")
    args = p.parse_args()

    x = np.load(os.path.join(args.bundle, "test_inputs.npy"))
    if args.write_inputs:
        os.makedirs(args.write_inputs, exist_ok=True)
        for i in range(len(x)):
            np.save(os.path.join(args.write_inputs, f"{i:04d}.npy"),
                    np.ascontiguousarray(x[i:i + 1]))
        print(f"digits_accuracy: wrote {len(x)} inputs [1,1,8,8] to {args.write_inputs}")
        return
    if not args.outputs_dir:
        p.error("OUTPUTS_DIR is required (or --write-inputs)")

    labels = np.load(os.path.join(args.bundle, "test_labels.npy"))
    with open(os.path.join(args.bundle, "meta.json")) as f:
        meta = json.load(f)
    if args.int8:
        if "accuracy_onnxruntime" not in meta.get("int8", {}):
            fail(f"the bundle has no INT8 model: {meta.get('int8')}")
        ref = np.load(os.path.join(args.bundle, meta["int8"]["reference_logits"]))
        ref_correct = meta["int8"]["correct_onnxruntime"]
        ref_by = "ONNX Runtime INT8"
    else:
        ref = np.load(os.path.join(args.bundle, "reference_logits.npy"))
        ref_correct = meta["correct"]
        ref_by = meta.get("framework", "framework")
    n = len(labels)
    out, layout = load_outputs(args.outputs_dir, args.output_name, n)
    if not np.all(np.isfinite(out)):
        fail(f"{int((~np.isfinite(out)).sum())} non-finite values in the outputs")

    pred = out.argmax(1)
    correct = int((pred == labels).sum())
    diff = float(np.abs(out.astype(np.float64) - ref.astype(np.float64)).max())
    differing = int((pred != ref.argmax(1)).sum())
    ok_acc = correct == ref_correct
    ok_tol = args.atol is None or diff <= args.atol
    result = {"layout": layout, "n": n, "correct": correct, "accuracy": correct / n,
              "reference_correct": ref_correct, "reference_accuracy": ref_correct / n,
              "reference": ref_by, "max_abs_diff": diff, "predictions_differing": differing,
              "int8": args.int8, "atol": args.atol, "pass": ok_acc and ok_tol}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"digits_accuracy: accuracy {correct / n:.6f} ({correct}/{n}, {layout} outputs)"
              f"; {ref_by}: {ref_correct / n:.6f} ({ref_correct}/{n}) -> "
              f"{'SAME' if ok_acc else 'DIFFERENT'}")
        print(f"digits_accuracy: max abs diff vs reference logits {diff:.3g}"
              + ("" if args.atol is None else f" (atol {args.atol}: "
                 f"{'ok' if ok_tol else 'EXCEEDED'})")
              + f"; predictions differing from the reference: {differing}")
    sys.exit(0 if ok_acc and ok_tol else 1)


if __name__ == "__main__":
    main()
