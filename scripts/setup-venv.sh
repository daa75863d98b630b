#!/usr/bin/env bash
# Creates the test-only virtual environment .venv (ignored by git) on top of Debian's
# interpreter, so that it sees Debian's python3-torch/onnx/numpy/sklearn/torchvision
# (scripts/packages/models.txt), and installs ONNX Runtime from PyPI into it. ONNX Runtime is a
# reference for tests and benchmarks only; nothing in ManyCL or kann links to it.
#
# Idempotent: when .venv exists and `import onnxruntime.quantization` works in it, it does
# nothing and needs no network. Usage: scripts/setup-venv.sh [VENV_DIR]   (default: <repo>/.venv)
# Environment: MANYCL_ORT_VERSION, MANYCL_ONNX_VERSION override the pinned versions.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${1:-$root/.venv}"
ort_version="${MANYCL_ORT_VERSION:-1.20.1}"
# ONNX Runtime's quantization tool (onnxruntime.quantization, used for the INT8 digits model)
# imports onnx.reference, which Debian 12's python3-onnx (1.12) lacks: the venv gets its own
# onnx from PyPI, shadowing Debian's inside the venv only.
onnx_version="${MANYCL_ONNX_VERSION:-1.16.2}"
python=/usr/bin/python3   # Debian's interpreter: the first python3 on PATH may be another one

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import onnxruntime, onnxruntime.quantization" 2>/dev/null; then
  echo "setup-venv: $venv ready (onnxruntime $("$venv/bin/python" -c 'import onnxruntime; print(onnxruntime.__version__)'))"
  exit 0
fi

if [ ! -x "$venv/bin/python" ]; then
  echo "setup-venv: creating $venv with $python --system-site-packages"
  "$python" -m venv --system-site-packages "$venv"
fi
echo "setup-venv: installing onnxruntime==$ort_version onnx==$onnx_version from PyPI"
# --no-deps would miss coloredlogs/flatbuffers/sympy; numpy and protobuf come from Debian
# (system site packages) and satisfy onnxruntime's requirements, so pip leaves them alone.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "onnxruntime==$ort_version" "onnx==$onnx_version"
"$venv/bin/python" -c "import onnxruntime, onnxruntime.quantization, onnx, numpy; print('setup-venv: onnxruntime', onnxruntime.__version__, 'onnx', onnx.__version__, 'numpy', numpy.__version__)"
