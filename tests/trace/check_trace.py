"""`kann simulate --trace` and `kann run --trace`: the Perfetto/Chrome JSON trace has, on every
cluster's compute track, one span per operator step named after the compile report's operators
("prologue", then "NAME (OP)"), in order, back to back, each enclosing that step's compute.

usage: check_trace.py KANN MODEL.onnx INPUT.npy WORK_DIR   (OCL_ICD_VENDORS set by ctest)
"""
import json
import os
import subprocess
import sys

kann, model, sample, work = sys.argv[1:5]
os.makedirs(work, exist_ok=True)


def run(*args):
    result = subprocess.run([kann, *args], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"FAIL: kann {' '.join(args)}: {result.stderr}")
    return result.stdout


def check(trace_path, kbin, clusters):
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    report = json.loads(run("inspect", kbin).split("compile report (JSON):\n", 1)[1])
    expected = ["prologue"] + [f"{op['name']} ({op['op']})" for op in report["ops"]]
    tracks = {e["tid"]: e["args"]["name"] for e in events
              if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid", 0) >= 100}
    compute = {tid: name for tid, name in tracks.items() if name.endswith(" compute")}
    assert len(compute) >= clusters, f"{trace_path}: compute tracks {compute}"
    seen = 0
    for tid, track in sorted(compute.items()):
        spans = sorted((e for e in events if e.get("ph") == "X" and e.get("tid") == tid),
                       key=lambda e: e["ts"])
        steps = [e for e in spans if "step" in (e.get("args") or {})]
        if not steps:
            continue  # a cluster the network does not use
        seen += 1
        names = [e["name"] for e in steps]
        assert names == expected, f"{trace_path}: {track}: {names} != {expected}"
        assert [e["args"]["step"] for e in steps] == list(range(len(expected)))
        for before, after in zip(steps, steps[1:]):  # back to back in modeled time
            assert abs(before["ts"] + before["dur"] - after["ts"]) < 1e-6, (track, before, after)
        # Every other span of the track (the operators' compute) lies inside one step.
        for e in spans:
            if e in steps:
                continue
            inside = [s for s in steps
                      if s["ts"] - 1e-6 <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"] + 1e-6]
            assert inside, f"{trace_path}: {track}: {e['name']} at {e['ts']} is in no step"
        assert any(e not in steps and e["dur"] > 0 for e in spans), f"{track}: no compute span"
    assert seen == clusters, f"{trace_path}: {seen} clusters have steps, expected {clusters}"
    print(f"{trace_path}: {seen} cluster(s) x {len(expected)} steps: {', '.join(expected)}")


for clusters in (5, 1):
    kbin = os.path.join(work, f"digits{clusters}.kbin")
    run("compile", model, "-o", kbin, "--clusters", str(clusters))
    simulated = os.path.join(work, f"simulate{clusters}.json")
    out = run("simulate", kbin, "--input", sample, "--output-dir", work, "--trace", simulated)
    assert simulated in out, out
    check(simulated, kbin, clusters)
    through_icd = os.path.join(work, f"run{clusters}.json")
    out = run("run", kbin, "--input", sample, "--trace", through_icd)
    assert through_icd in out, out
    check(through_icd, kbin, clusters)

# A trace that cannot be written is an error, not a silent loss.
for command in ("simulate", "run"):
    result = subprocess.run([kann, command, os.path.join(work, "digits1.kbin"), "--input", sample,
                             "--trace", os.path.join(work, "no-such-dir", "t.json")],
                            capture_output=True, text=True)
    assert result.returncode != 0 and "--trace" in result.stderr, (command, result.stderr)
print("traces: OK")
