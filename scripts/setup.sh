#!/usr/bin/env bash
# The main job: install what is needed, build, and run the bundled example through the
# OpenCL ICD loader on the ManyCL device and its sub-devices.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
build="${MANYCL_BUILD_DIR:-$root/build}"
export OCL_ICD_VENDORS="$build/vendors"
"$build/examples/device_tour/device_tour"
