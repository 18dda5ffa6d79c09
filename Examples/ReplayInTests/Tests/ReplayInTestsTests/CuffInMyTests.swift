// SPDX-License-Identifier: GPL-2.0-or-later
import CuffTesting
import Foundation
import Testing

/// The cuff repository's captures/ (your package would keep its own captures beside its tests).
let captures = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("captures")

/// A captured session replays to the records `cuff replay` printed for it.
@Test func aCapturedSessionReplaysToItsReading() throws {
    let replayed = try CuffReplay.replay(path: captures.appendingPathComponent("hypertensive.btsnoop").path)
    let printed = try String(contentsOf: captures.appendingPathComponent("hypertensive.ndjson"), encoding: .utf8)
    #expect(replayed.ndjsonLines.map { $0 + "\n" }.joined() == printed)

    let reading = try #require(replayed.measurements.first)
    #expect(reading.systolic.doubleValue == 165)
    #expect(reading.diastolic.doubleValue == 102)
    #expect(reading.unit == .mmHg)
}

/// My own GATT client against a simulated cuff, in process: ATT PDUs in and out, simulated time.
@Test func myClientReadsASimulatedCuff() throws {
    var cuff = try SimulatedCuff(CuffSimulation(scenario: .hypertensive, seed: 7, autostart: true))
    let measurement = try #require(cuff.database.characteristic(BluetoothUUID(0x2A35)))
    let handle = [UInt8(measurement.valueHandle & 0xFF), UInt8(measurement.valueHandle >> 8)]
    let cccd = try #require(measurement.cccdHandle)

    _ = cuff.connect()
    // Write Request to the CCCD: indications on. The cuff answers with a Write Response.
    #expect(cuff.receive([0x12, UInt8(cccd & 0xFF), UInt8(cccd >> 8), 0x02, 0x00]).pdus == [[0x13]])

    var readings: [DecodedValue] = []
    while cuff.isConnected, cuff.now < .seconds(600) {
        var inbox = cuff.advance(by: cuff.nextEvent ?? .seconds(1)).pdus
        while !inbox.isEmpty {
            let pdu = inbox.removeFirst()
            guard pdu.first == 0x1D else { continue }  // Handle Value Indication
            if Array(pdu[1...2]) == handle { readings.append(CuffDecoder.decode(Array(pdu.dropFirst(3)))) }
            inbox += cuff.receive([0x1E]).pdus  // Handle Value Confirmation
        }
    }

    #expect(readings.count == 1)
    let reading = try #require(readings.first)
    #expect(reading.failure == nil)
    #expect(reading.json["unit"] == .string("mmHg"))
    guard case let .double(systolic)? = reading.json["systolic"] else {
        Issue.record("no systolic: \(reading.line)")
        return
    }
    #expect(systolic >= 140)  // a hypertensive reading
}
