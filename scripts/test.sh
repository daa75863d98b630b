#!/usr/bin/env bash
# Builds ManyCL and runs the whole test suite. With --sanitizers (or MANYCL_SANITIZERS=1) it
# also runs the suite under ASan+UBSan and the concurrency tests under TSan.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sanitizers="${MANYCL_SANITIZERS:-0}"
[ "${1:-}" = "--sanitizers" ] && sanitizers=1
jobs="${MANYCL_JOBS:-$(nproc)}"
"$root/scripts/install-deps.sh"

run_suite() { # build-dir label-regex cmake-args...
  local dir="$1" labels="$2"
  shift 2
  cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMANYCL_BUILD_BENCH=OFF "$@"
  cmake --build "$dir" -j "$jobs"
  if [ -n "$labels" ]; then
    ctest --test-dir "$dir" -j "$jobs" --output-on-failure -L "$labels"
  else
    ctest --test-dir "$dir" -j "$jobs" --output-on-failure
  fi
}

run_suite "$root/build" ""
if [ "$sanitizers" = 1 ]; then
  run_suite "$root/build-asan" "" -DMANYCL_SANITIZE="address;undefined"
  run_suite "$root/build-tsan" "concurrency" -DMANYCL_SANITIZE=thread
fi
