#!/usr/bin/env bash
# Installs what is needed, builds, and runs the main job (scripts/main-job.sh): the bundled
# digit classifier compiled by kann and run through the OpenCL ICD loader on sub-devices.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
"$root/scripts/main-job.sh"
