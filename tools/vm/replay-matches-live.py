#!/usr/bin/env python3
# On the host, after a VM run: `cuff replay` of the VM's btmon capture (OUT/capture.btsnoop) must
# give the same measurement records as the live runs printed (OUT/PATTERN files), all keys but
# received_at (the capture's clock instead of ours) and the device address; no record missing, none
# extra.
#
#   python3 tools/vm/replay-matches-live.py [--live-models-only] OUT PATTERN...   (e.g. "measure-*.ndjson")
#
# --live-models-only: replayed records of a device model no live record names are left out (the
# capture also holds sessions that are checked another way).
import glob, json, subprocess, sys

args = sys.argv[1:]
live_models_only = "--live-models-only" in args
args = [a for a in args if a != "--live-models-only"]
out, patterns = args[0], args[1:]


def measurements(lines):
    ms = []
    for line in lines:
        line = line.strip()
        if not line:
            continue
        r = json.loads(line)
        if r.get("type") == "measurement":
            r.pop("received_at", None)
            r["device"].pop("address", None)
            ms.append(json.dumps(r, sort_keys=True))
    return ms


live = []
for pattern in patterns:
    for f in sorted(glob.glob(out + "/" + pattern)):
        live += measurements(open(f))
replayed = subprocess.run([".build/debug/cuff", "replay", out + "/capture.btsnoop", "--quiet"], capture_output=True, text=True)
got = measurements(replayed.stdout.splitlines())
if live_models_only:
    models = {json.loads(m)["device"].get("model") for m in live}
    got = [m for m in got if json.loads(m)["device"].get("model") in models]
print(f"live measurements: {len(live)}, replayed (both controllers' view, central sessions only): {len(got)}")
if not live:
    sys.exit("no live measurements to compare")
missing = [m for m in live if m not in got]
if missing:
    print("live records missing from the replay:")
    for m in missing[:5]:
        print("  ", m)
    sys.exit(1)
extra = [m for m in got if m not in live]
if extra:
    print(f"replay has {len(extra)} record(s) the live runs did not print:")
    for m in extra[:5]:
        print("  ", m)
    sys.exit(1)
print("replay matches the live runs")
