"""The example from Python: kann.load_custom_ops, kann.compile and kann.Session (through the
ICD) on the custom-operator model, against numpy.

usage: check_python.py MODEL.onnx LIB.so   (PYTHONPATH: <build>/python, OCL_ICD_VENDORS set)
"""
import sys

import kann
import numpy as np

model, library = sys.argv[1:3]
kann.load_custom_ops(library)
network = kann.compile(model, clusters=5)
session = kann.Session(network)
x = np.random.default_rng(7).uniform(-4, 4, (1, 8, 24, 20)).astype(np.float32)
y = session.run(None, {"X": x})[0]
n = -x
expected = 1 / (1 + np.exp(-(1.5 * n / (1 + np.abs(n)) - 0.25)))
error = float(np.abs(y - expected).max())
print(f"kann.Session: max |error| {error:.3g} vs numpy")
sys.exit(0 if error <= 1e-6 else 1)
