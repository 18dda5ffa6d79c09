// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSimulator
import GATT
import Omron
import Testing

@testable import CuffSession

/// The `into:` forms of the peripherals and the central sessions (issue #29 item 3): a whole
/// session run with one reused buffer per side gives exactly what the array-returning forms give,
/// and each call appends after what the buffer held.
@Suite struct ActionConventionTests {
    /// One side's output for one call, as text (both sides' outputs in one transcript).
    enum Step: Equatable {
        case central([CentralAction])
        case peripheral([PeripheralOutput])
    }

    /// Runs `configuration`'s session against `peripheral` on a virtual clock until it finishes,
    /// with the array-returning forms (`buffered` false) or the `into:` forms into one buffer per
    /// side that keeps a first element of its own (`buffered` true).
    static func transcript(
        _ configuration: CuffSessionConfiguration, _ peripheral: any GATTPeripheral, buffered: Bool
    ) -> (steps: [Step], finished: Bool) {
        var p = peripheral
        var c = ProtocolSession(configuration: configuration)
        var now = Timestamp(nanoseconds: 1_000_000_000)
        func at() -> EventTime { EventTime(monotonic: now, wallMicros: 1_790_000_000_000_000 + now.nanoseconds / 1000) }
        let sentinelC = CentralAction.log("the driver's own")
        let sentinelP = PeripheralOutput.log("the driver's own")
        var bufferC: [CentralAction] = [sentinelC]
        var bufferP: [PeripheralOutput] = [sentinelP]
        var steps: [Step] = []
        var toPeripheral: [[UInt8]] = []
        var toCentral: [[UInt8]] = []
        var linkUp = true
        func onCentral(_ array: () -> [CentralAction], _ into: (inout [CentralAction]) -> Void) {
            let outs: [CentralAction]
            if buffered {
                into(&bufferC)
                #expect(bufferC.first == sentinelC)
                outs = Array(bufferC.dropFirst())
                bufferC.removeSubrange(1...)
            } else {
                outs = array()
            }
            steps.append(.central(outs))
            for case let .send(pdu) in outs { toPeripheral.append(pdu) }
            if outs.contains(.disconnect) { linkUp = false }
        }
        func onPeripheral(_ array: () -> [PeripheralOutput], _ into: (inout [PeripheralOutput]) -> Void) {
            let outs: [PeripheralOutput]
            if buffered {
                into(&bufferP)
                #expect(bufferP.first == sentinelP)
                outs = Array(bufferP.dropFirst())
                bufferP.removeSubrange(1...)
            } else {
                outs = array()
            }
            steps.append(.peripheral(outs))
            for o in outs {
                switch o {
                case let .send(pdu): toCentral.append(pdu)
                case .disconnect: linkUp = false
                case .log: break
                }
            }
        }
        onPeripheral({ p.connected(now: now, client: nil) }, { p.connected(now: now, client: nil, into: &$0) })
        onCentral({ c.start(at: at()) }, { c.start(at: at(), into: &$0) })
        var rounds = 0
        while !c.isFinished, rounds < 100_000 {
            rounds += 1
            if !linkUp {
                onCentral(
                    { c.disconnected("link closed", at: at()) }, { c.disconnected("link closed", at: at(), into: &$0) })
                break
            }
            if !toPeripheral.isEmpty {
                let pdu = toPeripheral.removeFirst()
                onPeripheral({ p.receive(pdu, now: now) }, { p.receive(pdu, now: now, into: &$0) })
                continue
            }
            if !toCentral.isEmpty {
                let pdu = toCentral.removeFirst()
                onCentral({ c.receive(pdu, at: at()) }, { c.receive(pdu, at: at(), into: &$0) })
                continue
            }
            guard let next = [c.nextDeadline, p.nextDeadline].compactMap({ $0 }).min() else { break }
            now = max(now, next)
            onPeripheral({ p.tick(now: now) }, { p.tick(now: now, into: &$0) })
            onCentral({ c.tick(at: at()) }, { c.tick(at: at(), into: &$0) })
        }
        return (steps, c.isFinished)
    }

    static func centralActions(_ steps: [Step]) -> [CentralAction] {
        var all: [CentralAction] = []
        for case let .central(a) in steps { all += a }
        return all
    }

    @Test func standardSessionAgainstTheSimulatedCuff() {
        var sim = SimulatorConfiguration()
        sim.autostart = true
        let config = CuffSessionConfiguration(address: "sim")
        let arrays = Self.transcript(config, CuffPeripheral(configuration: sim), buffered: false)
        let buffered = Self.transcript(config, CuffPeripheral(configuration: sim), buffered: true)
        #expect(arrays.finished && buffered.finished)
        #expect(buffered.steps == arrays.steps)
        let central = Self.centralActions(arrays.steps)
        #expect(central.contains { if case .emit(.measurement) = $0 { true } else { false } })
        #expect(central.last == .finished(.completed))
    }

    @Test func omronSessionAgainstTheSimulatedOmronCuff() {
        var config = CuffSessionConfiguration(address: "omron")
        config.forcedProtocol = .omron
        var sim = SimulatorConfiguration()
        sim.omron = OmronSimulation(profile: OmronCatalog.defaultProfile(.classic))
        let make = { OmronPeripheral(configuration: sim)! }
        let arrays = Self.transcript(config, make(), buffered: false)
        let buffered = Self.transcript(config, make(), buffered: true)
        #expect(arrays.finished && buffered.finished)
        #expect(buffered.steps == arrays.steps)
        // Both sides had something to say beyond the start: discovery, the unlock, replies.
        #expect(arrays.steps.count > 20)
        let central = Self.centralActions(arrays.steps)
        #expect(central.contains { if case .emit(.measurement) = $0 { true } else { false } })
        #expect(central.suffix(2) == [.finished(.completed), .disconnect])
    }
}
