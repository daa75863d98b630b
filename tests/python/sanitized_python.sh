#!/usr/bin/env bash
# Runs Debian's interpreter (not instrumented) on a test that loads the instrumented kann module
# and ICD of an ASan+UBSan build tree, and fails on every sanitizer error and on every leak that
# one of our libraries allocated.
#
#   sanitized_python.sh PRELOAD OWN_DIR LOG_DIR PYTHON ARGS...
#
# PRELOAD: the sanitizer runtimes (LD_PRELOAD of the interpreter only, not of this script).
# OWN_DIR: the build tree; a leak whose allocation stack has a frame in a file under it (the
# kann module, libManyCL, libkann) is ours. CPython and the extension modules the tests import
# (protobuf, onnx, torch, ONNX Runtime) leave thousands of blocks unfreed at exit; a suppression
# naming them would also match every block our code allocates below a Python frame, so leaks
# are told apart by their allocation stacks instead.
set -uo pipefail
preload="$1" own="$2" logs="$3"
shift 3
rm -rf "$logs"
mkdir -p "$logs"
# exitcode=0: a leak alone does not fail the interpreter; the reports in LOG_DIR are judged
# below. It also applies to ASan errors, which are therefore looked for in the reports too.
# UBSan (its own runtime with gcc) still aborts the interpreter (halt_on_error).
LD_PRELOAD="$preload" \
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$logs/san" \
  LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}exitcode=0" \
  "$@"
status=$?
for report in "$logs"/san.*; do
  [ -e "$report" ] || continue
  if grep -q "ERROR: AddressSanitizer" "$report"; then
    echo "sanitized_python: AddressSanitizer error ($report):"
    cat "$report"
    status=1
  fi
  # Leak reports are blocks separated by blank lines, each headed "Direct leak" or
  # "Indirect leak" and followed by the allocation stack.
  if ! awk -v own="$own/" 'BEGIN { RS = "" }
       /^(Direct|Indirect) leak/ {
         if (index($0, own)) { print; print ""; ours++ } else foreign++
       }
       END {
         printf "sanitized_python: %d leak report(s) of ours, %d of the interpreter and its " \
                "extension modules (not ours, ignored)\n", ours, foreign
         exit ours > 0
       }' "$report"; then
    status=1
  fi
done
exit $status
