#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Throughput of the Capture reader + ATT extractor on one file, against tshark decoding ATT.
# Compiles Sources/Capture + Sources/CuffCore with `swiftc -O` into one binary under /tmp (no
# package release build), then times both.
#
# Usage: tools/capture/bench.sh CAPTURE [--no-tshark]
set -euo pipefail
file=${1:?usage: bench.sh CAPTURE [--no-tshark]}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat > "$work/main.swift" <<'SWIFT'
import Glibc
let path = CommandLine.arguments[1]
var clock = timespec(); clock_gettime(CLOCK_MONOTONIC, &clock)
let start = Double(clock.tv_sec) + Double(clock.tv_nsec) / 1e9
var records = 0, att = 0, warnings = 0, attBytes = 0
do {
    var reader = try CaptureReader(path: path)
    var extractor = ATTExtractor()
    var events: [CaptureEvent] = []
    while let r = try reader.next() {
        records += 1
        events.removeAll(keepingCapacity: true)
        try extractor.consume(r, into: &events)
        for e in events {
            switch e {
            case .att(let p): att += 1; attBytes += p.pdu.count
            case .warning: warnings += 1
            default: break
            }
        }
    }
} catch { print("error: \(error)"); exit(1) }
clock_gettime(CLOCK_MONOTONIC, &clock)
let seconds = Double(clock.tv_sec) + Double(clock.tv_nsec) / 1e9 - start
var st = stat(); stat(path, &st)
let mb = Double(st.st_size) / 1_048_576
func fixed(_ v: Double) -> String { String(Double(Int(v * 1000)) / 1000) }
print("cuff: \(records) records, \(att) ATT PDUs (\(attBytes) bytes), \(warnings) warnings in \(fixed(seconds)) s = \(fixed(mb / seconds)) MiB/s, \(Int(Double(records) / seconds)) records/s")
SWIFT

swiftc -O -wmo -parse-as-library -module-name CuffCore -emit-module -emit-module-path "$work/CuffCore.swiftmodule" \
    -c -o "$work/CuffCore.o" "$root"/Sources/CuffCore/*.swift
swiftc -O -wmo -module-name CaptureBench -I "$work" -o "$work/bench" "$work/main.swift" \
    "$root"/Sources/Capture/*.swift "$work/CuffCore.o" -lm
"$work/bench" "$file"
if [[ ${2:-} != --no-tshark ]] && command -v tshark >/dev/null; then
    s=$(date +%s.%N)
    n=$(tshark -r "$file" -Y btatt -T fields -e btatt.opcode 2>/dev/null | wc -l)
    e=$(date +%s.%N)
    echo "tshark: $n ATT frames in $(echo "$e - $s" | bc) s"
fi
