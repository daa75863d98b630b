#!/bin/bash
# Builds the Khronos OpenCL-ICD-Loader from ../shared/third_party (once per build tree) and runs
# clinfo and the ICD test binaries through it, with OCL_ICD_FILENAMES naming the build tree's
# libManyCL.so.
# usage: khronos_loader_test.sh THIRD_PARTY_DIR WORK_DIR LIBMANYCL CHECK_CLINFO CLINFO TEST_BINARY[@GTEST_FILTER]...
set -u
third_party="$1" work="$2" icd="$3" check_clinfo="$4" clinfo="$5"
shift 5

skip() {
  echo "SKIP: $*"
  exit 77
}
fail() {
  echo "FAIL: $*"
  exit 1
}

[ -d "$third_party" ] || skip "$third_party is absent: the Khronos loader test needs its OpenCL-ICD-Loader-*.tar.gz and OpenCL-Headers-*.tar.gz (not part of the project)"
loader_tgz=$(ls "$third_party"/OpenCL-ICD-Loader-*.tar.gz 2>/dev/null | head -n1)
headers_tgz=$(ls "$third_party"/OpenCL-Headers-*.tar.gz 2>/dev/null | head -n1)
[ -n "$loader_tgz" ] || skip "no OpenCL-ICD-Loader-*.tar.gz in $third_party"
[ -n "$headers_tgz" ] || skip "no OpenCL-Headers-*.tar.gz in $third_party"
[ -n "$clinfo" ] && [ -x "$clinfo" ] || skip "clinfo not found (Debian package clinfo)"

# Rebuild only when the archives change (the stamp names them and their sizes).
stamp="$(basename "$loader_tgz") $(stat -c %s "$loader_tgz") $(basename "$headers_tgz") $(stat -c %s "$headers_tgz")"
lib="$work/build/libOpenCL.so.1"
if [ ! -e "$lib" ] || [ "$(cat "$work/stamp" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$work"
  mkdir -p "$work/src"
  tar xzf "$loader_tgz" -C "$work/src" && tar xzf "$headers_tgz" -C "$work/src" || fail "cannot extract the archives"
  src=$(ls -d "$work"/src/OpenCL-ICD-Loader*/ | head -n1)
  headers=$(ls -d "$work"/src/OpenCL-Headers*/ | head -n1)
  echo "building the Khronos loader from $loader_tgz"
  if ! { cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
           -DOPENCL_ICD_LOADER_HEADERS_DIR="$headers" && cmake --build "$work/build"; } >"$work/build.log" 2>&1; then
    tail -n 30 "$work/build.log"
    fail "the Khronos loader did not build (log: $work/build.log)"
  fi
  [ -e "$lib" ] || fail "the loader build made no $lib"
  echo "$stamp" >"$work/stamp"
fi

# Only ManyCL: OCL_ICD_VENDORS names an empty folder so that no system ICD (/etc/OpenCL/vendors)
# is loaded next to it. OCL_ICD_ENABLE_TRACE is the Khronos loader's own switch: its trace
# proves which loader ran (ocl-icd also reads OCL_ICD_FILENAMES).
mkdir -p "$work/no-vendors"
export OCL_ICD_VENDORS="$work/no-vendors" OCL_ICD_FILENAMES="$icd"
export LD_LIBRARY_PATH="$work/build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

trace=$(OCL_ICD_ENABLE_TRACE=1 "$clinfo" -l 2>&1)
printf '%s\n' "$trace" | grep -q "KHR ICD trace.*successfully added vendor $icd" ||
  fail "the Khronos loader did not load $icd: $trace"
out=$("$clinfo" 2>&1)
printf '%s\n' "$out" | grep -Eq 'ICD loader Name +Khronos OpenCL ICD Loader' ||
  fail "clinfo did not run on the Khronos loader: $(printf '%s\n' "$out" | grep -A3 'ICD loader properties')"
"$check_clinfo" "$clinfo" || fail "clinfo through the Khronos loader"

for arg in "$@"; do
  binary="${arg%%@*}" filter="*"
  [ "$arg" != "$binary" ] && filter="${arg#*@}"
  name=$(basename "$binary")
  echo "== $name"
  # A binary linked against ocl-icd's libOpenCL.so.1 must pick up the Khronos one.
  ldd "$binary" | grep -q "libOpenCL.so.1 => $work/build/libOpenCL.so.1" ||
    fail "$name does not resolve libOpenCL.so.1 to the Khronos loader: $(ldd "$binary" | grep OpenCL)"
  if ! "$binary" --gtest_brief=1 "--gtest_filter=$filter" >"$work/$name.log" 2>&1; then
    tail -n 60 "$work/$name.log"
    fail "$name through the Khronos loader (log: $work/$name.log)"
  fi
  grep -E '^\[  (PASSED|SKIPPED) ' "$work/$name.log"
done
echo "Khronos loader: clinfo and $# test binaries pass"
