// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession
import CuffTestSupport
import Foundation
import Testing

@testable import Sinks

let killChildVariable = "CUFF_SINKS_KILL_CHILD_DB"

/// Runs only inside the child process that ``KillNineTests`` spawns (this same test binary):
/// stores numbered records one after another, printing `WRITTEN n` after each `write` returns,
/// until it is killed.
@Suite struct SinksKillChild {
    @Test(.enabled(if: ProcessInfo.processInfo.environment[killChildVariable] != nil))
    func childWritesUntilKilled() throws {
        let path = try #require(ProcessInfo.processInfo.environment[killChildVariable])
        let store = try SQLiteStore(path: path, warn: SinkWarnings.ignore)
        for n in 0..<60_000 {
            try store.write(.measurement(try Vectors.enhancedRecord(sequenceNumber: UInt16(n))))
            let line = "WRITTEN \(n)\n"
            _ = line.withCString { write(1, $0, strlen($0)) }
        }
    }
}

@Suite struct KillNineTests {
    /// The contract of `write`: once it returns, a kill -9 does not lose the row. (Power loss is
    /// covered by `synchronous = FULL`, checked in ``SQLiteStoreTests/walWithSynchronousFull()``.)
    @Test func killNineRightAfterWriteReturnsLosesNothingAcknowledged() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let path = dir.path("k.db")
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let child = try ChildProcess(
            ["--testing-library", "swift-testing", "--filter", "childWritesUntilKilled"], executable: exe,
            stdout: dir.path("child.out"),
            environment: [killChildVariable: path])
        // Wait for some acknowledged writes, then kill at once.
        let target = 25
        var acknowledged = -1
        var text = ""
        let deadline = Date().addingTimeInterval(60)
        while acknowledged < target && Date() < deadline {
            let ended = !child.isRunning
            text = dir.text("child.out")
            for line in text.split(separator: "\n") where line.hasPrefix("WRITTEN ") {
                acknowledged = max(acknowledged, Int(line.dropFirst(8)) ?? -1)
            }
            if ended { break }  // the child ended on its own
            usleep(1_000)
        }
        let status = child.kill9()
        try #require(
            acknowledged >= target, "child acknowledged only \(acknowledged) writes; output: \(text.suffix(500))")
        #expect(status == 128 + SIGKILL)
        // Read what survived, from a fresh store.
        let store = try SQLiteStore(path: path, mustExist: true, warn: SinkWarnings.ignore)
        #expect(try store.pragma("integrity_check") == "ok")
        let seqs = try store.history().compactMap(\.sequenceNumber)
        #expect(seqs.count >= acknowledged + 1)
        #expect(Array(seqs.prefix(acknowledged + 1)) == (0...acknowledged).map(UInt16.init))
    }
}

let tzChildVariable = "CUFF_SINKS_TZ_CHILD"

/// Runs only in the child that ``HostZoneTests`` spawns with a `TZ`: prints the FHIR and OMH times
/// of the C.0 worked example (device-local 2024-06-23T14:35:10) under the system offset policy.
@Suite struct SinksTZChild {
    @Test(.enabled(if: ProcessInfo.processInfo.environment[tzChildVariable] != nil))
    func childPrintsEffectiveTimes() throws {
        let m = try Vectors.bpm(Vectors.withDateTime)
        let line =
            "EFFECTIVE " + EffectiveTime.of(m, offset: .system).rfc3339 + " "
            + EffectiveTime.of(m, offset: .systemAtReception).rfc3339 + "\n"
        _ = line.withCString { write(1, $0, strlen($0)) }
    }
}

/// Runs only in the child that ``HostZoneTests`` spawns with a `TZ`: prints the offset the
/// system policy gives each wall time, received at each instant (Unix seconds).
@Suite struct SinksRepeatedHourChild {
    static let cases: [(wall: String, received: Int64)] = [
        // New York, 2025-11-02: 01:30 is 05:30Z (EDT) and 06:30Z (EST).
        ("2025-11-02T01:30:00", 1_762_061_460), ("2025-11-02T01:30:00", 1_762_065_060),
        ("2025-11-02T01:30:00", 1_762_059_600),
        // Berlin, 2025-10-26: 02:30 is 00:30Z (CEST) and 01:30Z (CET).
        ("2025-10-26T02:30:00", 1_761_442_800), ("2025-10-26T02:30:00", 1_761_439_200),
        ("2025-10-26T02:30:00", 1_761_436_800),
        // Shown once.
        ("2025-07-01T12:00:00", 1_762_065_060),
    ]

    @Test(.enabled(if: ProcessInfo.processInfo.environment[tzChildVariable] == "repeated-hour"))
    func childPrintsRepeatedHourOffsets() throws {
        var text = ""
        for c in Self.cases {
            let offset = UTCOffsetPolicy.hostUTCOffset(atLocalDateTime: c.wall, receivedAt: c.received)
            text += "OFFSET \(c.wall) \(c.received) \(offset.map(String.init) ?? "nil")\n"
        }
        _ = text.withCString { write(1, $0, strlen($0)) }
    }
}

@Suite struct HostZoneTests {
    /// A wall time shown twice (the hour repeated when DST ends) takes the offset that makes it the
    /// latest instant not after its reception (was: whichever `mktime` picked, an hour off for a
    /// live reading in that hour); both after it (a cuff clock ahead): the earlier.
    @Test(arguments: [
        ("America/New_York", ["-14400", "-18000", "-14400", "-", "-", "-", "-14400"]),
        ("Europe/Berlin", ["-", "-", "-", "3600", "7200", "7200", "7200"]),
    ])
    func aWallTimeShownTwiceTakesTheOffsetBeforeItsReception(tz: String, expected: [String]) throws {
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let child = try runToCompletion(
            exe, ["--testing-library", "swift-testing", "--filter", "childPrintsRepeatedHourOffsets"], timeout: nil,
            environment: [tzChildVariable: "repeated-hour", "TZ": tz])
        #expect(child.status == 0)
        let offsets = child.stdout.split(separator: "\n").filter { $0.hasPrefix("OFFSET ") }.map {
            String($0.split(separator: " ").last!)
        }
        #expect(offsets.count == 7)
        // Each zone's own cases (the other zone's wall times are ordinary there, or in its gap).
        let mine = tz == "America/New_York" ? [0, 1, 2, 6] : [3, 4, 5, 6]
        #expect(mine.map { offsets.indices.contains($0) ? offsets[$0] : "" } == mine.map { expected[$0] })
    }

    /// The device time gets the host's offset at ingest, read from the real zone machinery.
    @Test(arguments: [
        ("CUF-5:45", "+05:45", "+05:45"), ("America/New_York", "-04:00", "-05:00"),
        ("Australia/Sydney", "+10:00", "+11:00"),
        ("UTC", "+00:00", "+00:00"),
    ])
    func deviceTimeGetsTheHostZoneOffset(tz: String, atDeviceTime: String, atReception: String) throws {
        // The device time is 2024-06-23 (New York on EDT, Sydney on AEST); received_at is
        // 2026-11-22 (New York on EST, Sydney on AEDT).
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let child = try runToCompletion(
            exe, ["--testing-library", "swift-testing", "--filter", "childPrintsEffectiveTimes"], timeout: nil,
            environment: [tzChildVariable: "1", "TZ": tz])
        #expect(child.status == 0)
        let line = child.stdout.split(separator: "\n").first { $0.hasPrefix("EFFECTIVE ") }
        #expect(line == "EFFECTIVE 2024-06-23T14:35:10\(atDeviceTime) 2024-06-23T14:35:10\(atReception)"[...])
    }
}
