#!/usr/bin/env python3
"""Residual-Add fusion, before and after, on the same build: each model compiled twice
(`kann compile` with and without --no-residual-fusion) and run in alternating rounds
(`kann run --iterations N`), so both binaries see the same host load.

    bench/kann/residual_fusion_ab.py KANN MODELS_DIR [--models resnet50,mobilenetv2]
        [--precision fp32] [--clusters 5] [--rounds 5] [--iterations 20] [--work DIR]

Prints per model: the modeled cycles of both binaries (compile report), the median over the
rounds of `kann run`'s host latency (itself a median over the iterations) of each, their
ratio, and the number of element-wise records left. Host figures on a loaded machine are
indicative only: compare the two columns of one run, never across runs.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kann")
    ap.add_argument("models_dir")
    ap.add_argument("--models", default="resnet50,mobilenetv2")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--clusters", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="residual_ab.")
    print(f"| model | prec | modeled cycles unfused | fused | ratio | host ms unfused | fused | "
          f"ratio | eltwise records unfused / fused |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for model in args.models.split(","):
        onnx = os.path.join(args.models_dir, model + ".onnx")
        x = os.path.join(args.models_dir, model + ".input.npy")
        binaries = {}
        for variant, extra in (("unfused", ["--no-residual-fusion"]), ("fused", [])):
            stem = os.path.join(work, f"{model}.{args.precision}.c{args.clusters}.{variant}")
            run([args.kann, "compile", onnx, "-o", stem + ".kbin", "--clusters",
                 str(args.clusters), "--precision", args.precision, "--report-json",
                 stem + ".json"] + extra)
            with open(stem + ".json") as f:
                report = json.load(f)
            records = run([args.kann, "inspect", stem + ".kbin", "--records"])
            binaries[variant] = {
                "kbin": stem + ".kbin",
                "cycles": report["modeled_cycles"],
                "eltwise": len(re.findall(r"\beltwise\b", records)),
                "host": [],
            }
        for _ in range(args.rounds):
            for variant in ("unfused", "fused"):
                out = run([args.kann, "run", binaries[variant]["kbin"], "--input", x,
                           "--iterations", str(args.iterations)])
                m = re.search(r"^host time:\s*latency ([0-9.]+) ms", out, re.M)
                binaries[variant]["host"].append(float(m.group(1)))
        u, f = binaries["unfused"], binaries["fused"]
        hu, hf = statistics.median(u["host"]), statistics.median(f["host"])
        print(f"| {model} | {args.precision} | {u['cycles']:,} | {f['cycles']:,} | "
              f"{f['cycles'] / u['cycles']:.4f} | {hu:.1f} | {hf:.1f} | {hf / hu:.3f} | "
              f"{u['eltwise']} / {f['eltwise']} |")
        print(f"<!-- {model} host ms per round: unfused {u['host']} fused {f['host']} -->")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
