#!/usr/bin/env python3
"""Batches (`kann compile --batch N`, docs/kann.md "Batches"): for every model given, cluster
count and split, the outputs of a batch-N binary equal N batch-1 runs bit for bit (FP32: the
same arithmetic per image; compiled with `--winograd off`, since a Winograd convolution's
rounding depends on the band a pixel falls in, docs/native.md), match ONNX Runtime
(scripts/models/reference.py) within 1e-4 + 1e-4 * |ref| (also with the default Winograd
choice), the compiler's predicted cycles equal the simulated ones, and `kann run` (through the
ICD, kann::Session) takes the N images as one .npy and gives the same bytes.

  batch_test.py KANN REFERENCE_PY WORKDIR MODEL.onnx[:fp32|fp16][@N,N] ...

Run with the test venv's python (numpy, onnx); exits 77 (skipped) without it.
"""
import json
import os
import re
import subprocess
import sys

try:
    import numpy as np
    import onnx
except ImportError:
    sys.exit(77)

KANN, REFERENCE, WORK = sys.argv[1:4]
MODELS = sys.argv[4:]
os.makedirs(WORK, exist_ok=True)
failures = []


def run(args, expect_ok=True):
    p = subprocess.run(args, capture_output=True, text=True)
    if expect_ok and p.returncode != 0:
        raise SystemExit(f"FAILED: {' '.join(args)}\n{p.stdout}\n{p.stderr}")
    return p


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def outputs(directory):
    return {f: np.load(os.path.join(directory, f)) for f in sorted(os.listdir(directory))
            if f.endswith(".npy")}


def simulate(kbin, x, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    np.save(out_dir + ".in.npy", x)
    p = run([KANN, "simulate", kbin, "--input", out_dir + ".in.npy", "--output-dir", out_dir])
    modeled = int(re.search(r"modeled (\d+) cycles", p.stdout).group(1))
    predicted = int(re.search(r"predicted (\d+) cycles", p.stdout).group(1))
    return outputs(out_dir), modeled, predicted


def with_batch_dim(model_path, out_path, dim):
    """The model with its inputs' and outputs' first dimension symbolic ('N') or `dim`."""
    m = onnx.load(model_path)
    for v in list(m.graph.input) + list(m.graph.output):
        d = v.type.tensor_type.shape.dim[0]
        if isinstance(dim, str):
            d.dim_param = dim
        else:
            d.dim_value = dim
    onnx.save(m, out_path)
    return out_path


def test_model(spec):
    path, _, counts = spec.partition("@")
    path, _, precision = path.partition(":")
    precision = precision or "fp32"
    counts = [int(n) for n in counts.split(",")] if counts else [2, 5]
    name = os.path.splitext(os.path.basename(path))[0] + "_" + precision
    work = os.path.join(WORK, name)
    os.makedirs(work, exist_ok=True)
    # A symbolic batch dimension, as dynamic-batch exports have it.
    model = with_batch_dim(path, os.path.join(work, "symbolic.onnx"), "N")
    shape = [d.dim_value for d in onnx.load(path).graph.input[0].type.tensor_type.shape.dim]
    rng = np.random.RandomState(14)
    images = rng.standard_normal([max(counts)] + shape[1:]).astype(np.float32)
    # ONNX Runtime on the images one at a time (reference.py stacks the outputs).
    np.save(os.path.join(work, "images.npy"), images)
    run([sys.executable, REFERENCE, path, "--input", os.path.join(work, "images.npy"),
         "--output-dir", os.path.join(work, "ort"), "--quiet"])
    ort = outputs(os.path.join(work, "ort"))
    tol = 1e-4 if precision == "fp32" else 2e-2
    for clusters in (1, 5):
        one = os.path.join(work, f"one_x{clusters}.kbin")
        run([KANN, "compile", model, "-o", one, "--clusters", str(clusters),
             "--precision", precision, "--winograd", "off"])
        singles = [simulate(one, images[i:i + 1], os.path.join(work, f"one_x{clusters}_{i}"))[0]
                   for i in range(max(counts))]
        splits = ["sequential", "clusters"] + (["clusters:2"] if clusters == 5 else [])
        for n in counts:
            for split in splits:
                tag = f"{name} N={n} x{clusters} {split}"
                kbin = os.path.join(work, f"b{n}_x{clusters}_{split.replace(':', '')}.kbin")
                report = kbin + ".json"
                run([KANN, "compile", model, "-o", kbin, "--clusters", str(clusters), "--precision",
                     precision, "--batch", str(n), "--batch-split", split, "--report-json", report,
                     "--winograd", "off"])
                batch = json.load(open(report))["batch"]
                check(batch["images"] == n and sorted(i for g in batch["groups"]
                                                      for i in g["images"]) == list(range(n)),
                      f"{tag}: report lists every image once ({batch['chosen']})")
                if clusters > 1:
                    check(batch["split"] == split.split(":")[0], f"{tag}: split {batch['split']}")
                got, modeled, predicted = simulate(kbin, images[:n], kbin + ".out")
                check(modeled == predicted,
                      f"{tag}: predicted {predicted} = simulated {modeled} cycles")
                for f, y in got.items():
                    want = np.concatenate([s[f] for s in singles[:n]])
                    check(y.shape == want.shape and
                          np.array_equal(y.view(np.uint32), want.view(np.uint32)),
                          f"{tag}: {f} equals {n} batch-1 runs bit for bit")
                    ref = ort[f][:n].reshape(y.shape)
                    diff = float(np.max(np.abs(y - ref)))
                    check(bool(np.all(np.abs(y - ref) <= tol + tol * np.abs(ref))),
                          f"{tag}: {f} vs ONNX Runtime max |diff| {diff:.3g}")
                if n == counts[-1] and split == "clusters" and os.environ.get("OCL_ICD_VENDORS"):
                    # Through the ICD: `kann run --input` takes the N images as one array.
                    out_dir = kbin + ".run"
                    p = run([KANN, "run", kbin, "--input", kbin + ".out.in.npy", "--output-dir",
                             out_dir], expect_ok=False)
                    check(p.returncode == 0, f"{tag}: kann run ({p.stderr.strip()[-200:]})")
                    if p.returncode == 0:
                        ran = outputs(out_dir)
                        for f, y in got.items():
                            check(np.array_equal(ran[f].reshape(y.shape).view(np.uint32),
                                                 y.view(np.uint32)),
                                  f"{tag}: kann run {f} equals kann simulate")
    # The default Winograd choice in a batch: within the tolerance of ONNX Runtime.
    n = counts[-1]
    kbin = os.path.join(work, f"b{n}_x5_winograd.kbin")
    run([KANN, "compile", model, "-o", kbin, "--clusters", "5", "--precision", precision,
         "--batch", str(n)])
    got, modeled, predicted = simulate(kbin, images[:n], kbin + ".out")
    check(modeled == predicted, f"{name} N={n} x5 winograd: predicted {predicted} = simulated "
                                f"{modeled} cycles")
    for f, y in got.items():
        ref = ort[f][:n].reshape(y.shape)
        diff = float(np.max(np.abs(y - ref)))
        check(bool(np.all(np.abs(y - ref) <= tol + tol * np.abs(ref))),
              f"{name} N={n} x5 winograd: {f} vs ONNX Runtime max |diff| {diff:.3g}")
    # A batch that contradicts a static model batch is a one-line error.
    static2 = with_batch_dim(path, os.path.join(work, "static2.onnx"), 2)
    p = run([KANN, "compile", static2, "-o", os.path.join(work, "bad.kbin"), "--batch", "3"],
            expect_ok=False)
    lines = p.stderr.strip().splitlines()
    check(p.returncode != 0 and len(lines) >= 1 and lines[-1].startswith("kann: ") and
          "contradicts the model's static batch 2" in lines[-1],
          f"{name}: --batch 3 on a static batch 2 is refused: {lines[-1] if lines else ''}")
    run([KANN, "compile", static2, "-o", os.path.join(work, "ok.kbin"), "--batch", "2"])


for spec in MODELS:
    if os.path.exists(spec.partition("@")[0].partition(":")[0]):
        test_model(spec)
    else:
        check(False, f"{spec}: missing")
if failures:
    sys.exit(f"{len(failures)} checks failed")
print("all batch checks passed")
