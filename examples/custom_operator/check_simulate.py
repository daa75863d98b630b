"""Runs the example's binary with `kann simulate --custom-ops` (no OpenCL) and compares the
output with the network computed by numpy.

usage: check_simulate.py KANN MODEL.kbin LIB.so WORK_DIR [TOLERANCE]   (1e-6: FP32)
"""
import os
import subprocess
import sys

import numpy as np

kann, kbin, library, work = sys.argv[1:5]
tolerance = float(sys.argv[5]) if len(sys.argv) > 5 else 1e-6
os.makedirs(work, exist_ok=True)
x = np.random.default_rng(14).uniform(-4, 4, (1, 8, 24, 20)).astype(np.float32)
np.save(os.path.join(work, "x.npy"), x)
subprocess.run([kann, "simulate", kbin, "--input", os.path.join(work, "x.npy"), "--output-dir",
                work, "--custom-ops", library], check=True)
y = np.load(os.path.join(work, "Y.npy"))
n = -x
s = 1.5 * n / (1 + np.abs(n)) - 0.25
expected = 1 / (1 + np.exp(-s))
error = float(np.abs(y - expected).max())
print(f"kann simulate: max |error| {error:.3g} vs numpy")
sys.exit(0 if error <= tolerance else 1)
