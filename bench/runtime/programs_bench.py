#!/usr/bin/python3
"""Real OpenCL programs on ManyCL and PoCL, side by side in one run (issue 15).

Runs, through the ICD loader, each program once with only ManyCL visible (the build tree's
ICD file) and once with only PoCL (/etc/OpenCL/vendors/pocl.icd), then prints one table with
ManyCL / PoCL per row (throughput rows: above 1 means ManyCL is faster; time rows: below 1).

  clpeak   Debian's clpeak: integer and single-precision compute, global memory bandwidth
  clblast  CLBlast SGEMM n^3 (clblast_sgemm_bench, built when libclblast-dev is installed)
  hashcat  hashcat -b -m <modes> (MD5, SHA2-256 by default), headless; its wall time with cold
           kernel caches (every run gets a fresh XDG_CACHE_HOME: hashcat's, ManyCL's and PoCL's
           kernel caches all live there) is reported too: it is mostly kernel builds
  hashcat-kernel  (not in the default set) hashcat's MD5 kernel run directly
           (hashcat_kernel_bench) at two fixed launch shapes, one host thread per platform,
           MH/s per CPU-second: the kernel's own cost per hash, apart from hashcat's autotuning

  programs_bench.py [--build DIR] [--only clpeak,clblast,hashcat,hashcat-kernel] [--timeout S]
                    [--clpeak-tests compute-integer,compute-sp,global-bandwidth]
                    [--hashcat-modes 0,1400] [--hashcat-repeats 3] [--sgemm-n N]
                    [--manycl-env KEY=VALUE ...]

Host wall time figures (each program's own timing); ManyCL's modeled device time is another
quantity and is not reported here. Run on an idle host for figures worth comparing.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

POCL_ICD = "/etc/OpenCL/vendors/pocl.icd"


def vendor_dir(root, name, icd_file):
    d = os.path.join(root, "vendors-" + name)
    os.makedirs(d, exist_ok=True)
    shutil.copy(icd_file, os.path.join(d, name + ".icd"))
    return d


def run(cmd, env, timeout):
    """Runs cmd; returns (stdout+stderr text, wall seconds, 'ok' | 'timeout' | 'rc=N')."""
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, errors="replace", timeout=timeout)
        status = "ok" if p.returncode == 0 else "rc=%d" % p.returncode
        out = p.stdout
    except subprocess.TimeoutExpired as e:
        status = "timeout"
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
    return out, time.monotonic() - t0, status


CLPEAK_SECTIONS = {
    "Integer compute (GIOPS)": ("int compute", "GIOPS"),
    "Single-precision compute (GFLOPS)": ("float compute", "GFLOPS"),
    "Global memory bandwidth (GBPS)": ("global bandwidth", "GB/s"),
}


def parse_clpeak(text):
    rows, section = [], None
    for line in text.splitlines():
        s = line.strip()
        if s in CLPEAK_SECTIONS:
            section = CLPEAK_SECTIONS[s]
            continue
        m = re.match(r"^(\w+)\s*:\s*([0-9.]+)$", s)
        if section and m:
            rows.append(("clpeak %s %s" % (section[0], m.group(1)), section[1],
                         float(m.group(2)), "higher"))
    return rows


def bench_clpeak(args, env, _):
    rows = []
    for test in args.clpeak_tests.split(","):
        out, secs, status = run(["clpeak", "--" + test], env, args.timeout)
        got = parse_clpeak(out)
        rows += got
        if status != "ok":
            rows.append(("clpeak --%s" % test, "run", status, "note"))
    return rows


def bench_clblast(args, env, scratch):
    exe = os.path.join(args.build, "bench", "runtime", "clblast_sgemm_bench")
    if not os.path.exists(exe):
        return [("CLBlast SGEMM", "run", "not built (libclblast-dev missing?)", "note")]
    cache = tempfile.mkdtemp(prefix="cache-", dir=scratch)  # cold kernel caches: the first
    env = dict(env, XDG_CACHE_HOME=cache)                     # call builds CLBlast's kernels
    out, secs, status = run([exe, "--n", str(args.sgemm_n)], env, args.timeout)
    shutil.rmtree(cache, ignore_errors=True)
    m = re.search(r"gflops=([0-9.]+) first_ms=([0-9.]+)", out)
    if not m:
        return [("CLBlast SGEMM %d^3" % args.sgemm_n, "run", status, "note")]
    return [("CLBlast SGEMM %d^3" % args.sgemm_n, "GFLOP/s", float(m.group(1)), "higher"),
            ("CLBlast first SGEMM, cold caches (kernel builds)", "ms", float(m.group(2)), "lower")]


HASHCAT_NAMES = {"0": "MD5", "100": "SHA1", "1000": "NTLM", "1400": "SHA2-256"}


def bench_hashcat(args, env, scratch):
    rows = []
    for mode in args.hashcat_modes.split(","):
        name = "hashcat %s (-m %s)" % (HASHCAT_NAMES.get(mode, "mode"), mode)
        cache = tempfile.mkdtemp(prefix="cache-", dir=scratch)
        henv = dict(env, XDG_CACHE_HOME=cache, XDG_DATA_HOME=cache, XDG_CONFIG_HOME=cache)
        cmd = ["hashcat", "-b", "-m", mode, "--machine-readable", "-D", "1,2,3",
               "--backend-ignore-cuda", "--backend-ignore-hip"]
        # The first run builds the kernels; the next ones find them in the caches. hashcat
        # tunes its work per launch in every run, so single runs spread widely: the median.
        warm = []
        for r in range(1 + args.hashcat_repeats):
            out, secs, status = run(cmd, henv, args.timeout)
            speeds = [float(l.split(":")[-1]) for l in out.splitlines()
                      if re.match(r"^\d+:%s:" % mode, l)]
            if r == 0:
                rows.append((name + " wall time, cold caches", "s", secs if status == "ok" else status,
                             "lower"))
            elif speeds:
                warm.append(sum(speeds) / 1e6)
        if warm:
            warm.sort()
            n = len(warm)
            med = warm[n // 2] if n % 2 else 0.5 * (warm[n // 2 - 1] + warm[n // 2])
            rows.append((name + " (median of %d)" % n, "MH/s", med, "higher"))
        else:
            rows.append((name, "run", status, "note"))
        shutil.rmtree(cache, ignore_errors=True)
    return rows


# (local size, groups, loops per work-item): hashcat's shape on PoCL (1,024 candidates per
# work-item) and the one its autotuner picked on ManyCL in session 13 (32 per work-item, where
# the kernel's per-item set-up is a tenth of the work).
HASHCAT_KERNEL_SHAPES = ((1024, 10, 1024), (512, 320, 32))


def bench_hashcat_kernel(args, env, scratch):
    exe = os.path.join(args.build, "bench", "runtime", "hashcat_kernel_bench")
    if not os.path.exists(exe):
        return [("hashcat kernel", "run", "not built", "note")]
    cache = tempfile.mkdtemp(prefix="cache-", dir=scratch)
    env = dict(env, XDG_CACHE_HOME=cache, POCL_CACHE_DIR=os.path.join(cache, "pocl"),
               MANYCL_HOST_THREADS="1", POCL_MAX_PTHREAD_COUNT="1")
    rows = []
    for local, groups, loops in HASHCAT_KERNEL_SHAPES:
        name = "hashcat kernel m00000_s04, local %d, %d loops per item" % (local, loops)
        out, secs, status = run([exe, "--local", str(local), "--groups", str(groups),
                                 "--loops", str(loops)], env, args.timeout)
        m = re.search(r"cpu_mhs=([0-9.]+)", out)
        rows.append((name, "MH/CPU-s", float(m.group(1)), "higher") if m else
                    (name, "run", status, "note"))
    shutil.rmtree(cache, ignore_errors=True)
    return rows


BENCHES = {"clpeak": bench_clpeak, "clblast": bench_clblast, "hashcat": bench_hashcat,
           "hashcat-kernel": bench_hashcat_kernel}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(here, "..", "..", "build"))
    ap.add_argument("--only", default="clpeak,clblast,hashcat")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per program run")
    ap.add_argument("--clpeak-tests", default="compute-integer,compute-sp,global-bandwidth")
    ap.add_argument("--hashcat-modes", default="0,1400")
    ap.add_argument("--hashcat-repeats", type=int, default=3, help="warm runs per mode")
    ap.add_argument("--sgemm-n", type=int, default=1024)
    ap.add_argument("--manycl-env", action="append", default=[], metavar="KEY=VALUE",
                    help="extra environment for the ManyCL runs (e.g. MANYCL_COST=0)")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)

    lib = os.path.join(args.build, "lib", "libManyCL.so")
    for need, what in ((lib, "ManyCL's ICD library (build it first)"), (POCL_ICD, "PoCL's ICD file")):
        if not os.path.exists(need):
            sys.exit("programs_bench: %s not found: %s" % (what, need))
    scratch = tempfile.mkdtemp(prefix="manycl-programs-")
    try:
        manycl_icd = os.path.join(scratch, "manycl.icd.src")
        with open(manycl_icd, "w") as f:
            f.write(os.path.realpath(lib) + "\n")
        platforms = [("ManyCL", vendor_dir(scratch, "manycl", manycl_icd)),
                     ("PoCL", vendor_dir(scratch, "pocl", POCL_ICD))]
        extra = dict(kv.split("=", 1) for kv in args.manycl_env)
        table = {}  # row -> {platform: value}, in first-seen order
        units = {}
        for bench in args.only.split(","):
            if bench not in BENCHES:
                sys.exit("programs_bench: unknown program '%s' (%s)" % (bench, ", ".join(BENCHES)))
            for plat, vendors in platforms:
                env = dict(os.environ, OCL_ICD_VENDORS=vendors)
                env.pop("OPENCL_VENDOR_PATH", None)
                if plat == "ManyCL":
                    env.update(extra)
                print("programs_bench: %s on %s ..." % (bench, plat), file=sys.stderr, flush=True)
                for row, unit, value, better in BENCHES[bench](args, env, scratch):
                    table.setdefault(row, {})[plat] = value
                    units[row] = (unit, better)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    load = os.getloadavg()[0]
    print("| program | unit | ManyCL | PoCL | ManyCL / PoCL |")
    print("|---|---|---:|---:|---:|")
    for row, vals in table.items():
        unit, better = units[row]
        m, p = vals.get("ManyCL", "-"), vals.get("PoCL", "-")
        ratio = "-"
        if isinstance(m, float) and isinstance(p, float) and p > 0:
            ratio = "%.2f%s" % (m / p, "" if better == "higher" else " (time)")
        fmt = lambda v: ("%.3g" % v if v < 100 else "%.0f" % v) if isinstance(v, float) else str(v)
        print("| %s | %s | %s | %s | %s |" % (row, unit, fmt(m), fmt(p), ratio))
    print("load average at the end: %.1f; ManyCL environment: %s" %
          (load, " ".join(args.manycl_env) or "default"))


if __name__ == "__main__":
    main()
