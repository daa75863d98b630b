#!/usr/bin/env bash
# Runs pyopencl's own test_array.py and test_algorithm.py (from the PyPI sdist of the version
# Debian installed) against the ManyCL ICD of a build tree, each test in its own process so that
# a crash or a hang costs one test, not the rest of the run. Prints per-file and total counts of
# passed / failed / skipped / crashed / hung tests, and keeps each test's output.
#
#   scripts/run-pyopencl-tests.sh [-k EXPR] [-t SECONDS] [-j JOBS] [FILE ...]
#
#   FILE       test_array.py, test_algorithm.py (default: both)
#   -k EXPR    only tests whose id contains EXPR (substring, as grep -F)
#   -t SECONDS per-test time limit, a test over it counts as hung (default 600)
#   -j JOBS    tests run at once (default 1)
#
# Environment: MANYCL_BUILD (default <repo>/build), MANYCL_PYOPENCL_CACHE (where the sdist and
# its tests are kept, default ~/.cache/manycl/pyopencl), PYTHON (default /usr/bin/python3: the
# interpreter Debian's python3-pyopencl and python3-pytest belong to). Logs go to
# $MANYCL_PYOPENCL_CACHE/logs/<file>/; a summary of non-passing tests ends the output.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MANYCL_BUILD:-$root/build}"
cache="${MANYCL_PYOPENCL_CACHE:-$HOME/.cache/manycl/pyopencl}"
python="${PYTHON:-/usr/bin/python3}"
filter=""
limit=600
jobs=1
while getopts "k:t:j:" opt; do
  case "$opt" in
  k) filter="$OPTARG" ;;
  t) limit="$OPTARG" ;;
  j) jobs="$OPTARG" ;;
  *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
files=("$@")
[ ${#files[@]} -eq 0 ] && files=(test_array.py test_algorithm.py)

# The tests must match the installed pyopencl: newer tests use newer pyopencl API.
version="$("$python" -c 'import pyopencl; print(pyopencl.VERSION_TEXT)')"
src="$cache/pyopencl-$version"
if [ ! -f "$src/test/test_array.py" ]; then
  mkdir -p "$cache"
  # --no-binary for pyopencl alone: the sdist is wanted, its build dependencies may be wheels.
  pip download --no-deps --no-binary pyopencl "pyopencl==$version" -d "$cache" >&2
  tar -xzf "$cache/pyopencl-$version.tar.gz" -C "$cache"
fi
# Run from a copy of test/ alone: from the sdist's root, 'import pyopencl' would find the
# uncompiled source package instead of Debian's.
tests="$cache/tests-$version"
if [ ! -d "$tests" ]; then
  mkdir -p "$tests.tmp"
  cp "$src"/test/*.py "$tests.tmp/"
  mv "$tests.tmp" "$tests"
fi

# The loader is pointed at a copy of the build's ICD library: a rebuild during the run (the
# library relinked under the loader) would otherwise fail the tests that start meanwhile.
icd="$cache/icd"
rm -rf "$icd"
mkdir -p "$icd"
lib="$(head -1 "$build/vendors/manycl.icd")"
cp "$lib" "$icd/${lib##*/}"
echo "$icd/${lib##*/}" >"$icd/manycl.icd"
export OCL_ICD_VENDORS="$icd"
export PYOPENCL_TEST="${PYOPENCL_TEST:-manycl}"
# pyopencl caches binaries by source and device name; a rebuilt ManyCL must compile afresh.
export PYOPENCL_NO_CACHE=1
# Build logs of failing tests end up in their logs.
export PYOPENCL_COMPILER_OUTPUT=1
cd "$tests"
pytest=("$python" -m pytest -p no:cacheprovider -q --rootdir "$tests")

# One test id in its own process; prints "<status> <id>" with status passed, failed, skipped,
# crashed (killed by a signal: segfault, abort) or hung (over the time limit).
run_one() {
  local id="$1" log="$2" rc status
  set +e
  timeout -k 10 "$limit" "${pytest[@]}" "$id" </dev/null >"$log" 2>&1
  rc=$?
  # pytest's last line: "1 passed, 2 warnings in 1.2s", "2 warnings, 1 error in 0.9s"...
  local last
  last="$(grep -E '^(=+ )?[0-9]+ [a-z]+.* in [0-9.]+s' "$log" | tail -1)"
  set -e
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    status=hung
  elif [ "$rc" -ge 128 ]; then
    status="crashed"
  elif [[ "$last" == *failed* ]] || [[ "$last" == *error* ]]; then
    status=failed
  elif [[ "$last" == *passed* ]] || [[ "$last" == *xpassed* ]]; then
    status=passed
  elif [[ "$last" == *skipped* ]] || [[ "$last" == *xfailed* ]]; then
    status=skipped
  else
    # No pytest summary line and no signal: the interpreter died some other way.
    status=crashed
  fi
  echo "$status rc=$rc $id" >>"$log"
  # The device part of the id is the same in every test: shortened to "ctx".
  printf '%s %s (%s)\n' "$status" "$(sed -E "s/<context factory for <[^>]*>>/ctx/" <<<"$id")" \
    "${log##*/}"
}

total_pass=0 total_fail=0 total_skip=0 total_crash=0 total_hang=0
summary=""
for file in "${files[@]}"; do
  logs="$cache/logs/${file%.py}"
  rm -rf "$logs"
  mkdir -p "$logs"
  # Ids as pytest prints them, relative to the rootdir (the tests' directory).
  "${pytest[@]}" --collect-only "$file" 2>/dev/null | grep '::' | grep -F -- "$filter" \
    >"$logs/ids" || true
  n="$(wc -l <"$logs/ids")"
  if [ "$n" = 0 ] && [ -z "$filter" ]; then
    # Collection itself failed (no ManyCL platform, an import error): say why.
    "${pytest[@]}" --collect-only "$file" | tail -20 >&2 || true
    echo "$file: no tests collected" >&2
    exit 1
  fi
  echo "== $file: $n tests" >&2
  results="$logs/results"
  : >"$results"
  i=0
  while IFS= read -r id; do
    i=$((i + 1))
    log="$logs/$i.log"
    if [ "$jobs" -gt 1 ]; then
      while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
      (run_one "$id" "$log" >>"$results") &
    else
      run_one "$id" "$log" | tee -a "$results" >&2
    fi
  done <"$logs/ids"
  wait
  p="$(grep -c '^passed ' "$results" || true)"
  f="$(grep -c '^failed ' "$results" || true)"
  s="$(grep -c '^skipped ' "$results" || true)"
  c="$(grep -c '^crashed ' "$results" || true)"
  h="$(grep -c '^hung ' "$results" || true)"
  total_pass=$((total_pass + p)) total_fail=$((total_fail + f)) total_skip=$((total_skip + s))
  total_crash=$((total_crash + c)) total_hang=$((total_hang + h))
  summary+="$file: $p passed, $f failed, $s skipped, $c crashed, $h hung (logs: $logs)"$'\n'
  grep -v '^passed \|^skipped ' "$results" | sort >"$logs/not-passed" || true
done

echo
for file in "${files[@]}"; do
  cat "$cache/logs/${file%.py}/not-passed"
done
echo
printf '%s' "$summary"
echo "total: $total_pass passed, $total_fail failed, $total_skip skipped, $total_crash crashed," \
  "$total_hang hung"
[ $((total_fail + total_crash + total_hang)) -eq 0 ]
