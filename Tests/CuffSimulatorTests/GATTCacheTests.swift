import CuffLogging
import Foundation
import Testing
import BloodPressure
import CuffCore
import CuffRuntime
import CuffSession
import CuffSimulator
import GATT
import Transport

/// The GATT cache end to end: the simulated cuff and `CentralDriver` over a real socketpair, the
/// cache in a directory of its own, one session after another (each with a fresh simulator, as a
/// cuff switched off and on again).
@Suite("GATT cache over a real socketpair", .serialized)
struct GATTCacheTests {
    final class Dir {
        let path: String
        init() throws {
            path =
                FileManager.default.temporaryDirectory.appendingPathComponent(
                    "cuff-gatt-\(UUID().uuidString.prefix(8))"
                ).path
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }
        var store: GATTCacheStore { GATTCacheStore(directory: path + "/gatt") }
    }

    static func simulator(_ change: (inout SimulatorConfiguration) -> Void = { _ in }) -> SimulatorConfiguration {
        var sim = SimulatorConfiguration(scenario: .normal, seed: 7, autostart: true)
        sim.linger = .seconds(1)
        change(&sim)
        return sim
    }

    /// One session against a new simulated cuff made from `sim`.
    static func session(_ sim: SimulatorConfiguration, cache: GATTCacheStore?) throws -> (
        run: SocketRun, end: SessionRecord, reading: MeasurementRecord
    ) {
        let logs = LogRecorder()
        let driver = PeripheralDriver(
            peripheral: CuffPeripheral(configuration: sim), clock: SimulationClock(speed: 400), signals: nil,
            log: logs.logger())
        let r = try SocketRun.run(driver: driver, logs: logs, gattCache: cache)
        let end = try #require(r.sessions.last)
        #expect(end.event == .end && r.outcome == .completed, "\(r.logs.suffix(6))")
        #expect(r.measurements.count == 1, "\(r.logs)")
        return (r, end, try #require(r.measurements.first))
    }

    /// What must not differ between two sessions' readings of the same seeded cuff: the values,
    /// and what is known of the device (from the cache or read from it).
    static func same(_ a: MeasurementRecord, _ b: MeasurementRecord) -> Bool {
        a.systolic == b.systolic && a.diastolic == b.diastolic && a.meanArterialPressure == b.meanArterialPressure
            && a.pulseRate == b.pulseRate && a.status == b.status && a.userID == b.userID && a.device == b.device
            && a.stored == b.stored
    }

    @Test func aKnownCuffNeedsAtMostFourRequestsBeforeItsReading() throws {
        let dir = try Dir()
        let first = try Self.session(Self.simulator(), cache: dir.store)
        #expect(first.end.gattCache == .miss)
        // MTU, 3 service + 6 characteristic + 3 descriptor discoveries, 6 reads, Current Time and 2 CCCDs.
        #expect(first.end.attRequests == 22 && first.end.attRequestsBeforeReading == 22)
        let kept = try #require(dir.store.load(address: "unix:socketpair"))
        #expect(kept.serial == "SIM-000001" && kept.databaseHash == nil && kept.mtu == 247)
        #expect(kept.profile.characteristic(BluetoothUUID(0x2A35))?.cccdHandle != nil)

        let second = try Self.session(Self.simulator(), cache: dir.store)
        #expect(second.end.gattCache == .hit)
        #expect((second.end.attRequestsBeforeReading ?? 99) <= 4 && second.end.attRequests == 3, "\(second.run.logs)")
        #expect(
            Self.same(first.reading, second.reading),
            "\(first.reading.json.serialized()) vs \(second.reading.json.serialized())")
        #expect(second.end.device == first.end.device && second.end.device.features == first.end.device.features)
        #expect(
            second.end.json.serialized().contains(
                #""att_requests":3,"att_requests_before_reading":3,"gatt_cache":"hit""#))
        // The clock was written on its cached handle: the cuff stamps the reading with today's date.
        let today = String(ISO8601DateFormatter().string(from: Date()).prefix(10))
        #expect(second.reading.timestamp?.hasPrefix(today) == true, "\(second.reading.timestamp ?? "-")")

        let off = try Self.session(Self.simulator(), cache: nil)
        #expect(off.end.gattCache == .off && off.end.attRequests == 22)
        #expect(Self.same(first.reading, off.reading))
    }

    @Test func movedHandlesWithoutAHashFallBackToDiscoveryAndKeepTheReading() throws {
        let dir = try Dir()
        let first = try Self.session(Self.simulator(), cache: dir.store)
        let oldBPM = try #require(
            dir.store.load(address: "unix:socketpair")?.profile.characteristic(BluetoothUUID(0x2A35))?.valueHandle)
        // A firmware update moved every handle past the old ones: the first cached request fails.
        let moved = try Self.session(Self.simulator { $0.handleGap = 0x80 }, cache: dir.store)
        #expect(moved.end.gattCache == .stale, "\(moved.run.logs)")
        #expect(moved.run.logs.contains { $0.contains("at its cached handle failed") && $0.contains("Invalid Handle") })
        #expect(Self.same(first.reading, moved.reading))
        #expect((moved.end.attRequests ?? 0) > 22)
        let newBPM = try #require(
            dir.store.load(address: "unix:socketpair")?.profile.characteristic(BluetoothUUID(0x2A35))?.valueHandle)
        #expect(newBPM == oldBPM + 0x80)
        // The rewritten cache serves the next session.
        let again = try Self.session(Self.simulator { $0.handleGap = 0x80 }, cache: dir.store)
        #expect(again.end.gattCache == .hit && again.end.attRequests == 3)
        #expect(Self.same(first.reading, again.reading))
    }

    @Test func swappedCharacteristicsAreRefusedAtTheirCCCDsAndRediscovered() throws {
        let dir = try Dir()
        let first = try Self.session(Self.simulator(), cache: dir.store)
        // The cache says 2A35 is where 2A36 is and the other way round (same shapes, handles
        // that exist): no handle error can tell, but the cuff refuses notifications of its
        // indicate-only result, and indications of its notify-only cuff pressure.
        let kept = try #require(dir.store.load(address: "unix:socketpair")?.profile)
        let path = dir.store.path(address: "unix:socketpair")
        var lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map(String.init)
        let bpm = try #require(lines.firstIndex { $0.hasPrefix("characteristic 2A35 ") })
        let icp = try #require(lines.firstIndex { $0.hasPrefix("characteristic 2A36 ") })
        var a = lines[bpm].split(separator: " ").map(String.init), b = lines[icp].split(separator: " ").map(String.init)
        (a[1], b[1]) = (b[1], a[1])
        (a[4], b[4]) = (b[4], a[4])
        (lines[bpm], lines[icp]) = (a.joined(separator: " "), b.joined(separator: " "))
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        let swapped = try #require(dir.store.load(address: "unix:socketpair")?.profile)
        #expect(
            swapped.characteristic(BluetoothUUID(0x2A35))?.cccdHandle
                == kept.characteristic(BluetoothUUID(0x2A36))?.cccdHandle)
        #expect(
            swapped.characteristic(BluetoothUUID(0x2A36))?.valueHandle
                == kept.characteristic(BluetoothUUID(0x2A35))?.valueHandle)

        let told = try Self.session(Self.simulator(), cache: dir.store)
        #expect(told.end.gattCache == .stale, "\(told.run.logs)")
        #expect(
            told.run.logs.contains {
                $0.contains("at its cached handle failed") && $0.contains("Improperly Configured")
            }, "\(told.run.logs)")
        #expect(Self.same(first.reading, told.reading))
        // Discovery wrote the right handles back: the next session uses them.
        let again = try Self.session(Self.simulator(), cache: dir.store)
        #expect(again.end.gattCache == .hit && again.end.attRequests == 3)
        #expect(Self.same(first.reading, again.reading))
    }

    @Test func theDatabaseHashIsCheckedFirstAndAChangeRediscovers() throws {
        let dir = try Dir()
        let withHash = Self.simulator {
            $0.databaseHash = true; $0.serviceChanged = true
        }
        let first = try Self.session(withHash, cache: dir.store)
        #expect(first.end.gattCache == .miss)
        // What a session without the cache sends, then the hash read and the Service Changed
        // subscription for the cache.
        let off = try Self.session(withHash, cache: nil)
        #expect(first.end.attRequests == off.end.attRequests.map { $0 + 2 }, "\(first.run.logs)")
        let kept = try #require(dir.store.load(address: "unix:socketpair"))
        #expect(kept.databaseHash?.count == 16 && kept.serviceChangedHandle != nil)

        let second = try Self.session(withHash, cache: dir.store)
        #expect(
            second.end.gattCache == .hit && second.end.attRequests == 4
                && (second.end.attRequestsBeforeReading ?? 99) <= 4)
        #expect(Self.same(first.reading, second.reading))

        var moved = withHash
        moved.handleGap = 0x10
        let third = try Self.session(moved, cache: dir.store)
        #expect(third.end.gattCache == .stale)
        #expect(third.run.logs.contains { $0.contains("Database Hash changed") })
        #expect(Self.same(first.reading, third.reading))
        let rewritten = try #require(dir.store.load(address: "unix:socketpair"))
        #expect(rewritten.databaseHash != kept.databaseHash && rewritten.databaseHash?.count == 16)
    }

    @Test func aServiceChangedIndicationRediscoversAndKeepsTheReading() throws {
        let dir = try Dir()
        let first = try Self.session(Self.simulator { $0.serviceChanged = true }, cache: dir.store)
        let off = try Self.session(Self.simulator { $0.serviceChanged = true }, cache: nil)
        #expect(first.end.gattCache == .miss && first.end.attRequests == off.end.attRequests.map { $0 + 1 })
        // Same handles, but the cuff says its database changed: the session must not trust the cache.
        let told = try Self.session(
            Self.simulator {
                $0.serviceChanged = true; $0.indicatesServiceChanged = true
            }, cache: dir.store)
        #expect(told.end.gattCache == .stale, "\(told.run.logs)")
        #expect(told.run.logs.contains { $0.contains("indicated Service Changed: discovering") })
        #expect(Self.same(first.reading, told.reading))
    }

    /// Probe B3: another cuff behind the same name, whose database has the cached handles but
    /// other attributes at them. The cached clock handle is no clock on it: the write's refusal
    /// was passed over ("— continuing"), the subscriptions happened to fit, and its readings were
    /// decoded with the first cuff's quirks and named after it (pulse -15360000, exit 0). A
    /// refusal at a cached handle now rediscovers, and the device is read again.
    @Test func aRefusedWriteAtACachedHandleRediscoversAndReadsTheDeviceAgain() throws {
        let dir = try Dir()
        func run(_ q: QuirkProfile, cache: Bool = true) throws -> SocketRun {
            let logs = LogRecorder()
            let driver = PeripheralDriver(
                peripheral: CuffPeripheral(configuration: Self.simulator { $0.behave(as: q) }),
                clock: SimulationClock(speed: 400), signals: nil, log: logs.logger())
            return try SocketRun.run(driver: driver, logs: logs, gattCache: cache ? dir.store : nil)
        }
        let first = try run(.andUA651)
        #expect(first.sessions.last?.gattCache == .miss && !first.measurements.isEmpty, "\(first.logs)")
        let other = try run(.beurerBM85)
        #expect(other.sessions.last?.gattCache == .stale, "\(other.logs)")
        #expect(
            other.logs.contains { $0.contains("dateTime at its cached handle failed") && $0.contains("(0x03)") },
            "\(other.logs)")
        let m = try #require(other.measurements.last)
        #expect(m.device.model == "BM85" && other.sessions.last?.device.model == "BM85")
        // The reading a session without the cache takes from the same cuff.
        let fresh = try #require(try run(.beurerBM85, cache: false).measurements.last)
        #expect(
            Self.same(m, fresh) && m.warnings == fresh.warnings,
            "\(m.json.serialized()) vs \(fresh.json.serialized())")
        #expect(other.logs.contains { $0.contains("applying quirk profile beurer-bm85") }, "\(other.logs)")
        #expect(dir.store.load(address: "unix:socketpair")?.values[.modelNumber] == Array("BM85".utf8))
    }

    @Test func aFIFOInPlaceOfTheCacheFileIsNotWaitedOn() throws {
        let dir = try Dir()
        let store = dir.store
        let path = store.path(address: "unix:socketpair")
        try FileManager.default.createDirectory(atPath: store.directory, withIntermediateDirectories: true)
        #expect(mkfifo(path, 0o600) == 0)
        // (A blocking open would wait here for a writer that never comes.)
        let said = LogRecorder()
        #expect(store.load(address: "unix:socketpair", log: said.logger()) == nil)
        #expect(said.lines.first?.contains("is not a regular file; discovering") == true, "\(said.lines)")
        let s = try Self.session(Self.simulator(), cache: store)
        #expect(s.end.gattCache == .miss)
        // Rewritten as a file in its place.
        #expect(store.load(address: "unix:socketpair")?.serial == "SIM-000001")
    }

    @Test func aCacheFileOfAnotherFormatIsIgnoredAndRewritten() throws {
        let dir = try Dir()
        let store = dir.store
        let path = store.path(address: "unix:socketpair")
        try FileManager.default.createDirectory(atPath: store.directory, withIntermediateDirectories: true)
        try "cuff-gatt-cache 0\nwhatever\n".write(toFile: path, atomically: true, encoding: .utf8)
        let said = LogRecorder()
        #expect(store.load(address: "unix:socketpair", log: said.logger()) == nil)
        #expect(said.lines.first?.contains("not a cuff GATT cache") == true)
        let s = try Self.session(Self.simulator(), cache: store)
        #expect(s.end.gattCache == .miss)
        #expect(store.load(address: "unix:socketpair")?.serial == "SIM-000001")
        // Private: only the user reads what is known of their cuff.
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }
}

@Suite("GATT cache file")
struct LearnedCuffFileTests {
    @Test func roundTripsThroughItsText() throws {
        var profile = GATTProfile(services: [GATTProfile.Service(uuid: BluetoothUUID(0x1810), handle: 5, endHandle: 12)]
        )
        profile.services[0].characteristics = [
            GATTProfile.Characteristic(
                uuid: BluetoothUUID(0x2A35), properties: .indicate, declarationHandle: 6, valueHandle: 7, cccdHandle: 8),
            GATTProfile.Characteristic(
                uuid: BluetoothUUID("f000aa01-0451-4000-b000-000000000000")!, properties: [.read, .write],
                declarationHandle: 9, valueHandle: 10),
        ]
        let learned = LearnedCuff(
            address: "unix:/tmp/a b.sock", mtu: 185, databaseHash: Array(0..<16), profile: profile,
            values: [.serialNumber: Array("SN 1".utf8), .modelNumber: []])
        let text = learned.encoded
        #expect(try LearnedCuff(parsing: text) == learned)
        #expect(!text.contains("a b"))  // strings in hex: nothing to escape
        #expect(throws: LearnedCuffError(.malformedLine, line: 5)) {
            try LearnedCuff(
                parsing: text.replacingOccurrences(of: "service 1810 0x0005 0x000C", with: "service 1810 0x000C 0x0005")
            )
        }
        #expect(throws: LearnedCuffError(.incomplete, line: 1)) { try LearnedCuff(parsing: LearnedCuff.magic + "\n") }
    }

    @Test func oneFilePerAddressBesideTheBondStore() {
        let env: [String: String] = ["XDG_STATE_HOME": "/state", "HOME": "/home/u"]
        #expect(GATTCacheStore.defaultDirectory(bonds: nil) { env[$0] } == "/state/cuff/gatt")
        #expect(
            GATTCacheStore.defaultDirectory(bonds: nil) { ["HOME": "/home/u"][$0] } == "/home/u/.local/state/cuff/gatt")
        #expect(GATTCacheStore.defaultDirectory(bonds: "/var/lib/cuff/bonds") { env[$0] } == "/var/lib/cuff/gatt")
        let store = GATTCacheStore(directory: "/c")
        let a = store.path(address: "unix:/tmp/cuffs/a.sock"), b = store.path(address: "unix:/tmp/cuffs_a.sock")
        #expect(a != b && a.hasPrefix("/c/unix__tmp_cuffs_a.sock-") && a.hasSuffix(".gatt"))
        #expect(store.path(address: "AA:BB:CC:DD:EE:FF").hasPrefix("/c/AA_BB_CC_DD_EE_FF-"))
    }
}
