#!/usr/bin/env bash
# The main job: compile the bundled digit classifier with kann and run it through the
# OpenCL ICD loader on ManyCL sub-devices, printing the results and the accuracy on the
# held-out test set next to the framework's. Expects a build in build/ (scripts/build.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MANYCL_BUILD_DIR:-$root/build}"
models="$root/examples/models/digits"
out="$build/main-job"
kann="$build/kann/tool/kann"
export OCL_ICD_VENDORS="$build/vendors"
mkdir -p "$out"

echo "== kann compile: digits CNN (ONNX) -> program binary for one cluster"
"$kann" compile "$models/model.onnx" -o "$out/digits.kbin" --clusters 1 --report "$out/digits-report.html"

echo
echo "== kann run: one sample through the ICD"
"$kann" run "$out/digits.kbin" --input "$models/sample_input.npy"

echo
echo "== kann run: the 360 test samples on 5 sub-devices at once (one host thread each)"
"$kann" run "$out/digits.kbin" --input "$models/test_inputs.npy" --subdevices 5 --output-dir "$out/test"
/usr/bin/python3 "$root/scripts/models/digits_accuracy.py" "$out/test"
