// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import CuffSession
import GATT
import Testing
@testable import Capture

/// Discovery responses read in place give what parsing them into an ATTPDU gives: the same
/// services, characteristics, descriptors, discovery time and outstanding request, for
/// well-formed answers, answers to another request, and malformed ones.
@Suite("Discovery short path")
struct DiscoveryShortPathTests {
    static let at = EventTime(monotonic: .seconds(5), wallMicros: 5_000_000)

    /// The general path: the request, then the response parsed into an ATTPDU.
    static func general(_ request: [UInt8], _ response: [UInt8]) -> SessionObserver {
        var o = SessionObserver(configuration: CuffSessionConfiguration(address: "t"))
        var out: [SessionObserver.Output] = []
        o.connected(at: at, into: &out)
        o.request(try! ATTPDU(parsing: request), at, &out)
        if let pdu = try? ATTPDU(parsing: response) { o.response(pdu, at, &out) }
        return o
    }

    /// The observer as a replay drives it: both PDUs through `pdu(_:fromCentral:at:into:)`.
    static func replayed(_ request: [UInt8], _ response: [UInt8]) -> (SessionObserver, [SessionObserver.Output]) {
        var o = SessionObserver(configuration: CuffSessionConfiguration(address: "t"))
        var out: [SessionObserver.Output] = []
        o.connected(at: at, into: &out)
        out.removeAll()
        o.pdu(request, fromCentral: true, at: at, into: &out)
        o.pdu(response, fromCentral: false, at: at, into: &out)
        return (o, out)
    }

    static let primary: [UInt8] = [0x10, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28]
    static let secondary: [UInt8] = [0x10, 0x01, 0x00, 0xFF, 0xFF, 0x01, 0x28]
    static let chars: [UInt8] = [0x08, 0x01, 0x00, 0xFF, 0xFF, 0x03, 0x28]
    static let info: [UInt8] = [0x04, 0x01, 0x00, 0xFF, 0xFF]
    static let byValue: [UInt8] = [0x06, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28, 0x10, 0x18]

    static let cases: [(String, [UInt8], [UInt8])] = [
        (
            "services, 16-bit", primary,
            [0x11, 0x06, 0x01, 0x00, 0x05, 0x00, 0x00, 0x18, 0x06, 0x00, 0x10, 0x00, 0x10, 0x18]
        ),
        ("services, 128-bit", primary, [0x11, 0x14, 0x20, 0x00, 0x30, 0x00] + (0..<16).map { UInt8($0) }),
        (
            "services answering a secondary-service request", secondary,
            [0x11, 0x06, 0x01, 0x00, 0x05, 0x00, 0x00, 0x18]
        ),
        ("services answering a Find By Type Value", byValue, [0x11, 0x06, 0x01, 0x00, 0x05, 0x00, 0x00, 0x18]),
        (
            "characteristics", chars,
            [0x09, 0x07, 0x02, 0x00, 0x20, 0x03, 0x00, 0x35, 0x2A, 0x04, 0x00, 0x10, 0x05, 0x00, 0x36, 0x2A]
        ),
        ("characteristic with an odd value length", chars, [0x09, 0x05, 0x02, 0x00, 0x20, 0x03, 0x00]),
        (
            "characteristics answering a service request", primary,
            [0x09, 0x07, 0x02, 0x00, 0x20, 0x03, 0x00, 0x35, 0x2A]
        ),
        ("descriptors, 16-bit", info, [0x05, 0x01, 0x04, 0x00, 0x02, 0x29, 0x05, 0x00, 0x01, 0x29]),
        ("descriptors, 128-bit", info, [0x05, 0x02, 0x04, 0x00] + (0..<16).map { UInt8(100 + $0) }),
        ("length below the handle fields", primary, [0x11, 0x03, 0x01, 0x00, 0x05]),
        ("entries not a whole number", chars, [0x09, 0x07, 0x02, 0x00, 0x20, 0x03, 0x00, 0x35]),
        ("no entries", chars, [0x09, 0x07]),
        ("bad format", info, [0x05, 0x03, 0x04, 0x00, 0x02, 0x29]),
        ("no length byte", primary, [0x11]),
    ]

    @Test(arguments: 0..<cases.count)
    func sameAsTheGeneralPath(_ i: Int) {
        let (name, request, response) = Self.cases[i]
        let g = Self.general(request, response)
        let (r, out) = Self.replayed(request, response)
        #expect(r.services == g.services, "\(name)")
        #expect(r.characteristics == g.characteristics, "\(name)")
        #expect(r.descriptors == g.descriptors, "\(name)")
        #expect(r.lastDiscoveryAt == g.lastDiscoveryAt, "\(name)")
        // A malformed answer is reported and leaves the request outstanding, as before.
        let malformed = (try? ATTPDU(parsing: response)) == nil
        #expect(r.outstanding == g.outstanding, "\(name)")
        #expect(
            out.contains { if case let .log(s) = $0 { s.hasPrefix("ignored a malformed ATT PDU") } else { false } }
                == malformed, "\(name)")
    }
}
