#!/bin/sh
# Runs Debian's clinfo against the build tree (OCL_ICD_VENDORS is set by ctest) and fails on
# any error line. clinfo reports failed queries as "<error: CL_...>" / "Invalid ..." and
# loader problems with "error"; "Error Correction support" is a device property, not an error.
set -u
clinfo="$1"
out=$("$clinfo" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ $rc -ne 0 ]; then
  echo "FAIL: clinfo exited with $rc"
  exit 1
fi
bad=$(printf '%s\n' "$out" | grep -E 'error|Invalid|<error|invalid' )
if [ -n "$bad" ]; then
  echo "FAIL: error lines:"
  printf '%s\n' "$bad"
  exit 1
fi
for want in 'Platform Name +ManyCL' 'Platform Extensions function suffix +MCL' 'Device Type +Accelerator' \
            'Max compute units +[0-9]+' 'Supported partition types +equally, by counts, by affinity domain'; do
  if ! printf '%s\n' "$out" | grep -Eq "$want"; then
    echo "FAIL: no line matching '$want'"
    exit 1
  fi
done
# The summary form lists the platform and its device.
list=$("$clinfo" -l 2>&1) || { echo "FAIL: clinfo -l"; exit 1; }
printf '%s\n' "$list" | grep -q 'Platform #0: ManyCL' || { echo "FAIL: clinfo -l: $list"; exit 1; }
echo "clinfo: OK"
