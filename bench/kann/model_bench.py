#!/usr/bin/python3
"""Model inference side by side: ManyCL (kann-compiled, run through the OpenCL ICD loader)
and ONNX Runtime on the same machine and thread count, for the CNNs that
scripts/models/export_cnns.py exports.

Per model and precision it prints one table row with:
  * compile time of `kann compile` (5 clusters of the mppa3 preset);
  * host latency: `kann run` (through the ICD) and ONNX Runtime (scripts/models/reference.py),
    measured in alternating rounds so that both see the same machine load; the figure is the
    median over rounds of each round's median, and the ratio is ManyCL / ONNX Runtime;
  * modeled device latency and FPS on the mppa3 preset (the simulator's cycle model);
  * DDR traffic per inference (`kann simulate`): bytes read minus the network input, against
    the model's parameter size at that precision (ONNX initializers, 4 or 2 bytes each);
  * SPM peak per cluster and the activations that spill to DDR (compile report);
  * aggregate throughput of K concurrent inferences (K = 1, 2, 5 by default, --subdevices),
    one per 1-cluster sub-device (host and modeled). A K above the device's cluster count needs
    a device with more clusters: MANYCL_DEVICES=FILE.json with {"preset": "mppa3",
    "clusters": 16} (the 1-cluster binaries are the same).

  bench/kann/model_bench.py [--models resnet50,mobilenetv2,...] [--precisions fp32,fp16,int8]
                            [--rounds 5] [--iterations 3] [--threads N] [--json out.json]
                            [--subdevices 1,2,5] [--winograd auto|all|off]

Needs a build (build/ or $MANYCL_BUILD_DIR), the exported models (build/models or
$MODELS_DIR; `/usr/bin/python3 scripts/models/export_cnns.py --out build/models`) and the
ONNX Runtime venv (scripts/setup-venv.sh).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_MODELS = "resnet50,mobilenetv2,squeezenet1_1,yolov3_416,yolov3_tiny"


def run(cmd, env=None):
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise RuntimeError(f"{' '.join(cmd[:2])} failed: {tail[0]}")
    return proc.stdout + proc.stderr


def find(pattern, text, what):
    m = re.search(pattern, text, re.M)
    if not m:
        raise RuntimeError(f"no {what} in output:\n{text[-2000:]}")
    return float(m.group(1))


def onnx_param_count(path):
    import onnx  # Debian's python3-onnx
    import numpy as np

    model = onnx.load(path, load_external_data=False)
    return sum(int(np.prod(t.dims)) for t in model.graph.initializer
               if t.data_type == onnx.TensorProto.FLOAT)


class Bench:
    def __init__(self, args):
        self.args = args
        build = os.environ.get("MANYCL_BUILD_DIR", os.path.join(ROOT, "build"))
        self.kann = os.path.join(build, "kann", "tool", "kann")
        self.models_dir = os.environ.get("MODELS_DIR", os.path.join(build, "models"))
        self.work = os.path.join(build, "model-bench")
        os.makedirs(self.work, exist_ok=True)
        self.env = dict(os.environ, OCL_ICD_VENDORS=os.path.join(build, "vendors"))

    def compile(self, model, precision, clusters):
        onnx_path = os.path.join(self.models_dir, model + ".onnx")
        stem = os.path.join(self.work, f"{model}.{precision}.c{clusters}")
        t0 = time.perf_counter()
        # INT8 of a float model: calibrated on the benchmark input (speed, not accuracy, is
        # measured here; docs/kann.md has the accuracy figures).
        calibration = ["--calibration", self.input(model)] if precision == "int8" else []
        run([self.kann, "compile", onnx_path, "-o", stem + ".kbin", "--clusters", str(clusters),
             "--precision", precision, "--report-json", stem + ".json",
             "--winograd", self.args.winograd] + calibration)
        seconds = time.perf_counter() - t0
        with open(stem + ".json") as f:
            return stem + ".kbin", seconds, json.load(f)

    def kann_run(self, kbin, model, iterations, subdevices=1):
        # One untimed warm-up inference, as reference.py gives ONNX Runtime (its first run).
        out = run([self.kann, "run", kbin, "--input", self.input(model), "--iterations",
                   str(iterations), "--warmup", "1", "--subdevices", str(subdevices)],
                  env=self.env)
        return {
            "host_ms": find(r"^host time:\s*latency ([0-9.]+) ms", out, "host latency"),
            "host_ips": find(r"^host time:.*throughput ([0-9.]+) inferences", out, "host throughput"),
            "modeled_ms": find(r"^modeled time:\s*latency ([0-9.]+) ms", out, "modeled latency"),
            "modeled_ips": find(r"^modeled time:.*throughput ([0-9.]+) inferences", out,
                                "modeled throughput"),
        }

    def ort_run(self, model, iterations):
        # The interpreter running this bench (Debian's python3 here; reference.py moves to the
        # venv when it lacks onnxruntime).
        out = run([sys.executable, os.path.join(ROOT, "scripts", "models", "reference.py"),
                   os.path.join(self.models_dir, model + ".onnx"), "--input", self.input(model),
                   "--threads", str(self.args.threads), "--iterations", str(iterations),
                   "--output-dir", os.path.join(self.work, model + ".ort")])
        return find(r"latency median ([0-9.]+) ms", out, "ORT latency")

    def simulate(self, kbin, model):
        out = run([self.kann, "simulate", kbin, "--input", self.input(model), "--output-dir",
                   os.path.join(self.work, "sim")])
        return {
            "ddr_read": find(r"DDR read ([0-9]+) B", out, "DDR read"),
            "ddr_written": find(r"written ([0-9]+) B", out, "DDR written"),
        }

    def input(self, model):
        return os.path.join(self.models_dir, model + ".input.npy")

    def measure(self, model, precision):
        import numpy as np

        a = self.args
        row = {"model": model, "precision": precision}
        kbin5, row["compile_s"], report = self.compile(model, precision, 5)
        kbin1, _, _ = self.compile(model, precision, 1)
        row["spm_peak"] = max(max(op["spm_peak"]) for op in report["ops"])
        row["spm_bytes"] = report["spm_bytes"]
        row["spilled"] = report["spilled"]
        row["params_blob"] = report["params_bytes"]
        elem = 2 if precision == "fp16" else 1 if precision == "int8" else 4
        row["params_onnx"] = onnx_param_count(os.path.join(self.models_dir, model + ".onnx")) * elem
        sim = self.simulate(kbin5, model)
        input_bytes = np.load(self.input(model)).nbytes
        row["ddr_param_read"] = sim["ddr_read"] - input_bytes
        row["ddr_ratio"] = row["ddr_param_read"] / row["params_onnx"]
        ours, ort = [], []
        for _ in range(a.rounds):  # alternate so both see the same load
            r = self.kann_run(kbin5, model, a.iterations)
            ours.append(r["host_ms"])
            row["modeled_ms"] = r["modeled_ms"]
            ort.append(self.ort_run(model, a.iterations))
        row["host_ms"] = statistics.median(ours)
        row["ort_ms"] = statistics.median(ort)
        row["ratio"] = row["host_ms"] / row["ort_ms"]
        row["fps"] = 1000.0 / row["modeled_ms"]
        row["concurrent"] = {}
        for k in a.subdevices:
            r = self.kann_run(kbin1, model, max(1, a.iterations // 2), subdevices=k)
            row["concurrent"][k] = (r["host_ips"], r["modeled_ips"])
        return row


def fmt_row(r):
    conc_h = " / ".join(f"{h:.1f}" for h, _ in r["concurrent"].values())
    conc_m = " / ".join(f"{m:.0f}" for _, m in r["concurrent"].values())
    spilled = ", ".join(r["spilled"]) if r["spilled"] else "none"
    if len(spilled) > 60:
        spilled = f"{len(r['spilled'])} tensors"
    return (f"| {r['model']} | {r['precision']} | {r['compile_s']:.2f} | {r['host_ms']:.1f} | "
            f"{r['ort_ms']:.1f} | {r['ratio']:.2f} | {r['modeled_ms']:.3f} | {r['fps']:.0f} | "
            f"{r['params_onnx'] / 1e6:.2f} | {r['ddr_param_read'] / 1e6:.2f} | {r['ddr_ratio']:.3f} | "
            f"{r['spm_peak'] / 2**20:.2f} | {spilled} | {conc_h} | {conc_m} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=DEFAULT_MODELS)
    p.add_argument("--precisions", default="fp32,fp16")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--json", help="also write the raw rows as JSON")
    p.add_argument("--winograd", default="auto", choices=["auto", "all", "off"],
                   help="kann compile --winograd (which 3x3 convolutions run as Winograd)")
    p.add_argument("--subdevices", default="1,2,5",
                   help="concurrent 1-cluster sub-device counts to measure (comma-separated)")
    args = p.parse_args()
    args.subdevices = [int(k) for k in args.subdevices.split(",")]
    bench = Bench(args)
    print(f"# host: {os.cpu_count()} cores; ORT threads {args.threads}; rounds {args.rounds} x "
          f"{args.iterations} iterations; load average {os.getloadavg()[0]:.1f}")
    ks = "/".join(str(k) for k in args.subdevices)
    print("| model | prec | compile s | ManyCL host ms | ORT host ms | ratio | modeled ms | "
          "modeled FPS | params MB | DDR param read MB | DDR/params | SPM peak MiB | spilled | "
          f"{ks} sub-devices host inf/s | {ks} sub-devices modeled inf/s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|")
    rows = []
    for model in args.models.split(","):
        for precision in args.precisions.split(","):
            try:
                r = bench.measure(model, precision)
                rows.append(r)
                print(fmt_row(r), flush=True)
            except RuntimeError as e:
                print(f"| {model} | {precision} | {str(e).splitlines()[0]} |", flush=True)
    print(f"# load average at the end {os.getloadavg()[0]:.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
