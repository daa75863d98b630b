#!/usr/bin/env bash
# Model inference side by side: ManyCL (kann-compiled, through the ICD) vs ONNX Runtime on the
# same machine and thread count, for the CNNs exported by scripts/models/export_cnns.py.
# Prints, per model and precision: compile time, host latency (ManyCL and ORT, ratio),
# modeled device latency and FPS on the mppa3 preset, parameter bytes and SPM use, and the
# aggregate throughput of 1, 2 and 5 concurrent inferences on sub-devices.
#
#   bench/kann/model_bench.sh [--models "resnet18 squeezenet1_1 ..."] [--iterations N]
# Needs: a build in build/ (or $MANYCL_BUILD_DIR), build/models from export_cnns.py, and the
# ONNX Runtime venv (scripts/setup-venv.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${MANYCL_BUILD_DIR:-$root/build}"
models_dir="${MODELS_DIR:-$build/models}"
models="resnet50 mobilenetv2 squeezenet1_1 yolov3_416 yolov3_tiny"
iterations=3
while [ $# -gt 0 ]; do
  case "$1" in
  --models) models="$2"; shift 2 ;;
  --iterations) iterations="$2"; shift 2 ;;
  *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
kann="$build/kann/tool/kann"
export OCL_ICD_VENDORS="$build/vendors"
threads=$(nproc)
work="$build/model-bench"
mkdir -p "$work"
echo "| model | precision | compile s | ManyCL host ms | ORT host ms | ratio | modeled ms | modeled FPS | params B | SPM peak B | 1/2/5 sub-devices inf/s (modeled) |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
for m in $models; do
  onnx="$models_dir/$m.onnx"
  input="$models_dir/$m.input.npy"
  [ -f "$onnx" ] || { echo "| $m | missing $onnx (run scripts/models/export_cnns.py) |"; continue; }
  ort_ms=$(/usr/bin/python3 "$root/scripts/models/reference.py" "$onnx" --input "$input" --threads "$threads" \
    --iterations "$iterations" --output-dir "$work/$m.ort" 2>&1 | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' | head -1)
  for precision in fp32 fp16; do
    for clusters in 5 1; do
      kbin="$work/$m.$precision.c$clusters.kbin"
      t0=$(date +%s.%N)
      if ! "$kann" compile "$onnx" -o "$kbin" --clusters $clusters --precision $precision \
          --report-json "$work/$m.$precision.c$clusters.json" > "$work/$m.$precision.c$clusters.log" 2>&1; then
        echo "| $m | $precision | compile failed: $(tail -1 "$work/$m.$precision.c$clusters.log") |"
        continue 2
      fi
      t1=$(date +%s.%N)
      [ $clusters = 5 ] && compile_s=$(echo "$t1 - $t0" | bc -l)
    done
    run5=$("$kann" run "$work/$m.$precision.c5.kbin" --input "$input" --iterations "$iterations")
    host_ms=$(echo "$run5" | sed -n 's/^host time: *latency \([0-9.]*\) ms.*/\1/p')
    modeled_ms=$(echo "$run5" | sed -n 's/^modeled time: latency \([0-9.]*\) ms.*/\1/p')
    fps=$(echo "scale=1; 1000 / $modeled_ms" | bc -l)
    params=$(sed -n 's/.*"params_bytes":\([0-9]*\).*/\1/p' "$work/$m.$precision.c5.json")
    spm=$(sed -n 's/.*"spm_required":\([0-9]*\).*/\1/p' "$work/$m.$precision.c5.json")
    conc=""
    for k in 1 2 5; do
      tput=$("$kann" run "$work/$m.$precision.c1.kbin" --input "$input" --subdevices $k --iterations 1 |
        sed -n 's/^modeled time:.*throughput \([0-9.]*\) inferences.*/\1/p')
      conc="$conc${conc:+ / }$tput"
    done
    ratio=$(echo "scale=2; $host_ms / $ort_ms" | bc -l)
    printf '| %s | %s | %.2f | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$m" "$precision" "$compile_s" "$host_ms" \
      "$ort_ms" "$ratio" "$modeled_ms" "$fps" "$params" "$spm" "$conc"
  done
done
