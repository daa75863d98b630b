#!/usr/bin/env bash
# One ctest of the `cts` label: builds one OpenCL-CTS suite from the snapshot in
# ../shared/conformance (once per build tree, into BUILD_DIR/cts) and runs the given tests of it
# against the build tree's ICD through the system loader, as an application would.
#   scripts/cts-quick.sh BUILD_DIR SUITE_DIR BINARY [TEST ...]
#   e.g. scripts/cts-quick.sh build device_partition test_device_partition
# Exits 77 (ctest: skipped, with the reason printed) when the snapshot is not there;
# MANYCL_CTS_DIR names another folder holding build-cts.sh; MANYCL_CTS_PRELOAD, when set, is the
# LD_PRELOAD of the test binary (the sanitizer runtimes of a sanitizer build tree's ICD).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "${1:?usage: cts-quick.sh BUILD_DIR SUITE_DIR BINARY [TEST ...]}" && pwd)"
suite="${2:?suite folder}"
binary="${3:?suite binary}"
shift 3
conf="${MANYCL_CTS_DIR:-$root/../shared/conformance}"
if [ ! -x "$conf/build-cts.sh" ]; then
  echo "cts: SKIPPED: no OpenCL-CTS snapshot at $conf (expected ../shared/conformance beside" \
    "the checkout, or MANYCL_CTS_DIR)"
  exit 77
fi
cts="$build/cts"
mkdir -p "$cts"
log="$cts/build-$binary.log"
# Suites are built one at a time (ctest may run several of these tests at once).
if ! flock "$cts/.build.lock" "$conf/build-cts.sh" "$cts" "$binary" >"$log" 2>&1; then
  echo "cts: building $binary failed; the end of $log:"
  tail -n 30 "$log"
  exit 1
fi
cd "$cts/test_conformance/$suite"
export OCL_ICD_VENDORS="$build/vendors"
unset OCL_ICD_FILENAMES
# Sanitizer build trees: the uninstrumented CTS binary loads an instrumented ICD.
if [ -n "${MANYCL_CTS_PRELOAD:-}" ]; then
  export LD_PRELOAD="$MANYCL_CTS_PRELOAD"
fi
# The harness exits non-zero when any selected test fails.
exec "./$binary" "$@"
