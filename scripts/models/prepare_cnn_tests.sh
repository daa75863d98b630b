#!/usr/bin/env bash
# Prepares the standard CNNs for kann's CNN tests (tests/kann/cnn_models): exports them with
# random weights (export_cnns.py, Debian's /usr/bin/python3) and computes ONNX Runtime's
# outputs for their fixed input (reference.py, in the venv made by scripts/setup-venv.sh).
#
#   scripts/models/prepare_cnn_tests.sh OUT_DIR NAME... [--fp16-analysis=NAME...]
#
# Make-like: a model is exported again only when NAME.onnx is missing or older than
# export_cnns.py, and ONNX Runtime runs again only when NAME.ort/ is missing or older than
# NAME.onnx. Writes OUT_DIR/NAME.onnx, NAME.input.npy, NAME.torch/, NAME.ort/<output>.npy, and
# for --fp16-analysis models NAME.fp16_deployed/ and NAME.fp16_storage/ (fp16_deployed.py).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
[ $# -ge 2 ] || { echo "usage: $0 OUT_DIR NAME..." >&2; exit 2; }
out="$1"
shift
analysis=()
models=()
for arg in "$@"; do
  case "$arg" in
    --fp16-analysis=*) analysis+=("${arg#--fp16-analysis=}") ;;
    *) models+=("$arg") ;;
  esac
done
set -- "${models[@]}"
mkdir -p "$out"
stale=()
for name in "$@"; do
  [ "$out/$name.onnx" -nt "$here/export_cnns.py" ] && [ -f "$out/$name.input.npy" ] || stale+=("$name")
done
if ((${#stale[@]})); then
  only=()
  for name in "${stale[@]}"; do only+=(--only "$name"); done
  /usr/bin/python3 "$here/export_cnns.py" --out-dir "$out" --threads 2 "${only[@]}"
fi
if [ ! -x "$root/.venv/bin/python" ]; then
  echo "prepare_cnn_tests: ONNX Runtime is needed: run scripts/setup-venv.sh" >&2
  exit 1
fi
for name in "$@"; do
  if [ ! -d "$out/$name.ort" ] || [ "$out/$name.onnx" -nt "$out/$name.ort" ]; then
    rm -rf "$out/$name.ort"
    "$root/.venv/bin/python" "$here/reference.py" "$out/$name.onnx" --input "$out/$name.input.npy" \
      --output-dir "$out/$name.ort.tmp" --threads 2 --quiet
    mv "$out/$name.ort.tmp" "$out/$name.ort"
  fi
done
# FP16 error analysis (Cnn.Binary16StorageError): the deployed network (BatchNormalization
# folded, weights and input rounded to binary16) in FP32, and with every activation rounded
# to binary16 too (fp16_deployed.py).
for name in "${analysis[@]}"; do
  deployed="$out/$name.fp16_deployed" storage="$out/$name.fp16_storage"
  if [ ! -d "$deployed" ] || [ ! -d "$storage" ] || [ "$out/$name.onnx" -nt "$deployed" ] ||
     [ "$here/fp16_deployed.py" -nt "$deployed" ]; then
    rm -rf "$deployed" "$storage"
    "$root/.venv/bin/python" "$here/fp16_deployed.py" "$out/$name.onnx" \
      --input "$out/$name.input.npy" --output-dir "$deployed.tmp" \
      --rounded-activations "$storage.tmp"
    mv "$storage.tmp" "$storage"
    mv "$deployed.tmp" "$deployed"
  fi
done
echo "prepare_cnn_tests: $* ready in $out"
