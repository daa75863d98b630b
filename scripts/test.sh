#!/usr/bin/env bash
# Builds ManyCL and runs the whole test suite. With --sanitizers (or MANYCL_SANITIZERS=1) it
# also runs the whole suite under ASan+UBSan and the concurrency tests under TSan.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sanitizers="${MANYCL_SANITIZERS:-0}"
[ "${1:-}" = "--sanitizers" ] && sanitizers=1
jobs="${MANYCL_JOBS:-$(nproc)}"
"$root/scripts/install-deps.sh"
# Test data: ONNX Runtime (PyPI, into .venv; idempotent, offline once made) is the reference of
# the CNN tests (label `cnn`), whose CTest fixture exports the models into the build tree with
# Debian's /usr/bin/python3. The ONNX node tests read Debian's libonnx-testdata (install-deps).
"$root/scripts/setup-venv.sh"

configure() { # build-dir cmake-args...
  local dir="$1"
  shift
  cmake -S "$root" -B "$dir" -G Ninja -DMANYCL_BUILD_BENCH=OFF "$@"
}

# The whole suite.
configure "$root/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$root/build" -j "$jobs"
ctest --test-dir "$root/build" -j "$jobs" --output-on-failure

if [ "$sanitizers" = 1 ]; then
  # Release + sanitizers: the instrumented LLVM-based compiler builds much faster without full
  # debug info; reports still carry symbolized stacks.
  configure "$root/build-asan" -DCMAKE_BUILD_TYPE=Release -DMANYCL_SANITIZE="address;undefined"
  cmake --build "$root/build-asan" -j "$jobs"
  ctest --test-dir "$root/build-asan" -j "$jobs" --output-on-failure

  # TSan: only what the concurrency tests need.
  configure "$root/build-tsan" -DCMAKE_BUILD_TYPE=Release -DMANYCL_SANITIZE=thread
  cmake --build "$root/build-tsan" -j "$jobs" --target ManyCL kann manycl_runtime_concurrency_tests \
    manycl_kernels_icd_tests_spmd manycl_kbin_icd_tests manycl_determinism_tests \
    manycl_work_groups_on_pool_tests
  ctest --test-dir "$root/build-tsan" -j "$jobs" --output-on-failure -L concurrency
fi
