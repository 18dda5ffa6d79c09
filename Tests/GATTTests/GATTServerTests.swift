// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Testing
@testable import GATT

let t0 = Timestamp.seconds(100)

/// Scripted bytes: each request is hand-written from Core Vol 3 Part F §3.4, each answer exact.
@Suite struct GATTServerTests {
    var server = GATTServer(database: testDatabase())

    /// Feeds hex, returns actions.
    mutating func rx(_ hex: String, at now: Timestamp = t0) -> [GATTServerAction] {
        server.receive(h(hex), now: now)
    }

    @Test mutating func primaryServiceDiscovery() {
        // Two 16-bit services fit; the 128-bit one has another length and waits for the next request.
        #expect(rx("10 0100 ffff 0028") == [send("11 06 0100 0300 0018 0400 0c00 1018")])
        #expect(rx("10 0d00 ffff 0028") == [send("11 14 0d00 1000 78563412f0debc9a78563412 00ff0000")])
        #expect(rx("10 1100 ffff 0028") == [send("01 10 1100 0a")])
        #expect(rx("10 0100 ffff 0128") == [send("01 10 0100 0a")], "no secondary services")
        #expect(rx("10 0100 ffff 0328") == [send("01 10 0100 10")], "Unsupported Group Type")
    }

    @Test mutating func characteristicDiscovery() {
        // 2 + 3 × 7 = 23 bytes: exactly the default MTU.
        #expect(rx("08 0400 0c00 0328") == [send("09 07 0500 20 0600 352a 0800 10 0900 362a 0b00 02 0c00 492a")])
        #expect(rx("08 0c00 0c00 0328") == [send("01 08 0c00 0a")])
        #expect(rx("08 0d00 1000 0328") == [send("09 15 0e00 2c 0f00 78563412f0debc9a78563412 01ff0000")])
    }

    @Test mutating func descriptorDiscovery() {
        #expect(rx("04 0700 0700") == [send("05 01 0700 0229")])
        #expect(rx("04 0100 0300") == [send("05 01 0100 0028 0200 0328 0300 002a")])
        // The value attribute has a 128-bit type, the CCCD a 16-bit one: only the first goes.
        #expect(rx("04 0f00 1000") == [send("05 02 0f00 78563412f0debc9a78563412 01ff0000")])
        #expect(rx("04 1000 1000") == [send("05 01 1000 0229")])
        #expect(rx("04 2000 ffff") == [send("01 04 2000 0a")])
        #expect(rx("04 0000 0100") == [send("01 04 0000 01")], "start handle 0")
        #expect(rx("04 0500 0400") == [send("01 04 0500 01")], "start > end")
    }

    @Test mutating func findByTypeValue() {
        #expect(rx("06 0100 ffff 0028 1018") == [send("07 0400 0c00")])
        #expect(rx("06 0100 ffff 0028 0d18") == [send("01 06 0100 0a")])
    }

    @Test mutating func readAndReadBlob() {
        // A 36-byte value: 22 bytes (MTU-1) in the Read Response, the rest by Read Blob.
        #expect(rx("0a 0300") == [.send([0x0B] + deviceNameValue.prefix(22))])
        #expect(rx("0c 0300 1600") == [.send([0x0D] + deviceNameValue.suffix(14))])
        #expect(rx("0c 0300 2400") == [send("0d")], "offset == length: empty part")
        #expect(rx("0c 0300 2500") == [send("01 0c 0300 07")], "Invalid Offset")
        #expect(rx("0a 5000") == [send("01 0a 5000 01")], "Invalid Handle")
        #expect(rx("0a 0000") == [send("01 0a 0000 01")], "handle 0 is never valid")
        #expect(rx("0a 0600") == [send("01 0a 0600 02")], "Read Not Permitted")
        #expect(rx("0a 0700") == [send("0b 0000")], "CCCD starts off")
    }

    @Test mutating func readByTypeCutsValuesToMTUMinus4() {
        #expect(rx("08 0100 ffff 002a") == [.send([0x09, 0x15, 0x03, 0x00] + deviceNameValue.prefix(19))])
        #expect(rx("08 0100 ffff 0629") == [send("01 08 0100 0a")])
        #expect(rx("08 0600 0600 352a") == [send("01 08 0600 02")], "first match unreadable")
    }

    @Test mutating func encryptionRequired() {
        #expect(rx("0a 0c00") == [send("01 0a 0c00 05")], "Insufficient Authentication on an unencrypted link")
        #expect(rx("08 0100 ffff 492a") == [send("01 08 0c00 05")])
        server.unencryptedLinkError = .insufficientEncryption
        #expect(rx("0a 0c00") == [send("01 0a 0c00 0f")])
        server.linkSecurityChanged(level: .medium)
        #expect(rx("0a 0c00") == [send("0b 2100")])
    }

    @Test func authenticationRequired() {
        var b = AttributeDatabase.Builder()
        b.addService(BluetoothUUID(0x1810))
        b.addCharacteristic(
            BluetoothUUID(0x2A49), properties: [.read, .write], permissions: [.readWrite, .authenticationRequired],
            value: [1])
        var s = GATTServer(database: b.build())
        #expect(s.receive(h("0a 0300"), now: t0) == [send("01 0a 0300 05")])
        s.linkSecurityChanged(level: .medium)
        #expect(s.receive(h("0a 0300"), now: t0) == [send("01 0a 0300 05")])
        #expect(s.receive(h("12 0300 02"), now: t0) == [send("01 12 0300 05")])
        s.linkSecurityChanged(level: .high)
        #expect(s.receive(h("0a 0300"), now: t0) == [send("0b 01")])
        #expect(
            s.receive(h("12 0300 02"), now: t0) == [
                send("13"), .written(handle: 3, uuid: BluetoothUUID(0x2A49), value: [2], withResponse: true),
            ])
        #expect(s.database.attribute(3)?.value == [2])
    }

    @Test mutating func writes() {
        #expect(rx("12 0700 020000") == [send("01 12 0700 0d")], "CCCD value of 3 bytes")
        #expect(rx("12 0700 02") == [send("01 12 0700 0d")], "CCCD value of 1 byte")
        #expect(
            rx("12 0700 0200") == [
                send("13"),
                .subscriptionChanged(valueHandle: 6, uuid: BluetoothUUID(0x2A35), notify: false, indicate: true),
            ])
        #expect(rx("0a 0700") == [send("0b 0200")])
        #expect(server.subscription(valueHandle: 6) == (false, true))
        #expect(rx("12 0600 01") == [send("01 12 0600 03")], "Write Not Permitted")
        #expect(rx("12 0500 01") == [send("01 12 0500 03")], "declarations are read-only")
        #expect(rx("12 9900 01") == [send("01 12 9900 01")])
        #expect(rx("52 0600 01") == [], "a refused command gets no answer")
        let long = [UInt8](repeating: 7, count: 513)
        #expect(server.receive([0x12, 0x0F, 0x00] + long, now: t0) == [send("01 12 0f00 0d")])
    }

    /// The client may exchange MTUs once (Core Vol 3 Part F §3.4.2.1): a second request is
    /// answered, and the MTU stays the one agreed (probe R: a second one with 23 shrank it under
    /// queued indications, which went out cut).
    @Test mutating func aSecondMTUExchangeChangesNothing() {
        #expect(rx("02 f700") == [send("03 f700")])
        #expect(server.mtu == 247)
        #expect(rx("02 1700") == [send("03 f700")])
        #expect(server.mtu == 247)
        server.reset()
        #expect(server.mtu == 23)
        #expect(rx("02 6400") == [send("03 f700")], "a new connection exchanges again")
        #expect(server.mtu == 100)
    }

    /// Each write form only where the characteristic's properties say so (Core Vol 3 Part G
    /// §3.3.1.1, Table 3.5): a Write Request to a value without Write gets Write Not Permitted, a
    /// Write Command to one without Write Without Response is dropped.
    @Test func writesTakeOnlyTheFormsThePropertiesAllow() {
        var b = AttributeDatabase.Builder()
        b.addService(BluetoothUUID(0x1810))
        b.addCharacteristic(BluetoothUUID(0xFF01), properties: .write, permissions: .write)  // value 0x0003
        b.addCharacteristic(BluetoothUUID(0xFF02), properties: .writeWithoutResponse, permissions: .write)  // 0x0005
        var s = GATTServer(database: b.build())
        #expect(s.receive(h("52 0300 01"), now: t0) == [], "a command to a Write-only value")
        #expect(s.database.attribute(3)?.value == [])
        #expect(
            s.receive(h("12 0300 02"), now: t0) == [
                send("13"), .written(handle: 3, uuid: BluetoothUUID(0xFF01), value: [2], withResponse: true),
            ])
        #expect(s.receive(h("12 0500 03"), now: t0) == [send("01 12 0500 03")], "a request to a command-only value")
        #expect(s.database.attribute(5)?.value == [])
        #expect(
            s.receive(h("52 0500 04"), now: t0) == [
                .written(handle: 5, uuid: BluetoothUUID(0xFF02), value: [4], withResponse: false)
            ])
        // A captured cuff served back takes either form.
        s.enforcesWriteProperties = false
        #expect(
            s.receive(h("52 0300 05"), now: t0) == [
                .written(handle: 3, uuid: BluetoothUUID(0xFF01), value: [5], withResponse: false)
            ])
    }

    /// A CCCD takes only the bits its characteristic's properties allow (bluetoothd's GATT
    /// server refuses the rest the same way): 0x0007 is BPM's (indicate), 0x000A ICP's (notify),
    /// 0x0010 the control point's (indicate).
    @Test mutating func subscriptionsTheCharacteristicDoesNotAllowAreRefused() {
        #expect(rx("12 0700 0100") == [send("01 12 0700 fd")], "notifications of an indicate-only value")
        #expect(rx("12 0a00 0200") == [send("01 12 0a00 fd")], "indications of a notify-only value")
        #expect(rx("12 0700 0300") == [send("01 12 0700 fd")], "both, where only one is allowed")
        #expect(rx("12 0700 0600") == [send("01 12 0700 fd")], "a reserved bit with a right one")
        #expect(rx("52 0700 0100") == [], "a refused command gets no answer")
        #expect(server.subscription(valueHandle: 6) == (false, false), "nothing refused was kept")
        #expect(server.subscription(valueHandle: 9) == (false, false))
        #expect(
            rx("12 0a00 0100") == [
                send("13"),
                .subscriptionChanged(valueHandle: 9, uuid: BluetoothUUID(0x2A36), notify: true, indicate: false),
            ])
        #expect(
            rx("12 0700 0000") == [
                send("13"),
                .subscriptionChanged(valueHandle: 6, uuid: BluetoothUUID(0x2A35), notify: false, indicate: false),
            ], "switching off is always allowed")
        // A captured cuff served back takes what its central wrote.
        var lenient = GATTServer(database: testDatabase())
        lenient.refusesImproperSubscriptions = false
        #expect(
            lenient.receive(h("12 0700 0100"), now: t0) == [
                send("13"),
                .subscriptionChanged(valueHandle: 6, uuid: BluetoothUUID(0x2A35), notify: true, indicate: false),
            ])
    }

    /// Both bits on a characteristic that both notifies and indicates.
    @Test func bothBitsWhereBothAreAllowed() {
        var b = AttributeDatabase.Builder()
        b.addService(BluetoothUUID(0x1810))
        b.addCharacteristic(BluetoothUUID(0x2A35), properties: [.notify, .indicate], permissions: [])
        var s = GATTServer(database: b.build())
        #expect(
            s.receive(h("12 0400 0300"), now: t0) == [
                send("13"),
                .subscriptionChanged(valueHandle: 3, uuid: BluetoothUUID(0x2A35), notify: true, indicate: true),
            ])
        #expect(s.receive(h("12 0400 0400"), now: t0) == [send("01 12 0400 fd")])
    }

    @Test mutating func unknownAndMalformed() {
        #expect(rx("3f 0102") == [send("01 3f 0000 06")], "unknown request: Request Not Supported")
        #expect(rx("0e 0300 0600") == [send("01 0e 0000 06")], "Read Multiple is not supported")
        #expect(rx("7f 0102") == [], "unknown command: ignored")
        #expect(rx("d2 0f00 01 000000000000000000000000") == [], "signed write: ignored")
        #expect(rx("0a 03") == [send("01 0a 0000 04")], "truncated request: Invalid PDU")
        #expect(rx("08 0100 ffff 032800") == [send("01 08 0000 04")], "3-byte UUID: Invalid PDU")
        guard case .protocolViolation = rx("52 0f").first else { Issue.record("truncated command"); return }
        guard case .protocolViolation = server.receive([], now: t0).first else { Issue.record("empty PDU"); return }
        guard case .protocolViolation = rx("0b 0102").first else { Issue.record("a response sent to a server"); return }
        // Responses this server cannot parse are not answered either: Read Multiple (Variable),
        // Prepare Write and Execute Write Responses.
        for response in ["0f 0102", "17 0300 0000 01", "19", "21 0100 01"] {
            let answer = rx(response)
            #expect(answer.count == 1, "\(response)")
            guard case .protocolViolation = answer.first else { Issue.record("answered \(response)"); return }
        }
    }

    @Test mutating func exchangeMTU() {
        #expect(rx("02 0002") == [send("03 f700")])
        #expect(server.mtu == 247)
        server.preferredMTU = 100
        server.reset()  // (each exchange on a connection of its own: a second one changes nothing)
        #expect(rx("02 0502") == [send("03 6400")])
        #expect(server.mtu == 100)
        server.reset()
        #expect(rx("02 0a00") == [send("03 6400")])
        #expect(server.mtu == 23, "a client MTU below 23 counts as 23")
        server.preferredMTU = 5
        #expect(server.preferredMTU == 23)
    }

    @Test mutating func notifications() {
        let value = [UInt8](0..<25)
        #expect(server.notify(handle: 9, value: value) == [.dropped(handle: 9, reason: .notSubscribed)])
        #expect(server.notify(handle: 6, value: value) == [.dropped(handle: 6, reason: .notSupported)])
        _ = rx("12 0a00 0100")
        #expect(server.notify(handle: 9, value: value) == [.send([0x1B, 0x09, 0x00] + value.prefix(20))])
        _ = rx("02 f700")
        #expect(server.notify(handle: 9, value: value) == [.send([0x1B, 0x09, 0x00] + value)])
    }

    @Test mutating func indicationsOneAtATime() {
        #expect(server.indicate(handle: 6, value: [1], now: t0) == [.dropped(handle: 6, reason: .notSubscribed)])
        _ = rx("12 0700 0200")
        #expect(server.indicate(handle: 6, value: [1], now: t0) == [send("1d 0600 01")])
        #expect(server.indicate(handle: 6, value: [2], now: t0) == [])
        #expect(server.queuedIndications == 1)
        #expect(server.nextDeadline == t0 + .seconds(30))
        #expect(rx("1e", at: t0 + .seconds(1)) == [.indicationConfirmed(handle: 6), send("1d 0600 02")])
        #expect(server.nextDeadline == t0 + .seconds(31))
        #expect(rx("1e") == [.indicationConfirmed(handle: 6)])
        #expect(server.nextDeadline == nil)
        guard case .protocolViolation = rx("1e").first else { Issue.record("stray confirmation"); return }
    }

    @Test mutating func queuedIndicationDroppedWhenUnsubscribed() {
        _ = rx("12 0700 0200")
        _ = server.indicate(handle: 6, value: [1], now: t0)
        _ = server.indicate(handle: 6, value: [2], now: t0)
        _ = rx("12 0700 0000")
        #expect(rx("1e") == [.indicationConfirmed(handle: 6), .dropped(handle: 6, reason: .notSubscribed)])
    }

    /// A driver whose clock runs faster than real time (a simulated cuff at --speed 6) stretches
    /// the timeout in its own time, so the client keeps its 30 real seconds.
    @Test mutating func transactionTimeoutInTheDriversTime() {
        server.transactionTimeoutHere = .seconds(180)
        _ = rx("12 0700 0200")
        #expect(server.indicate(handle: 6, value: [0], now: t0) == [send("1d 0600 00")])
        #expect(server.nextDeadline == t0 + .seconds(180))
        #expect(server.tick(now: t0 + .seconds(31)) == [])
        #expect(server.tick(now: t0 + .seconds(180)).first == .indicationTimedOut(handle: 6))
    }

    @Test mutating func indicationFloodAndTimeout() {
        _ = rx("12 0700 0200")
        #expect(server.indicate(handle: 6, value: [0], now: t0) == [send("1d 0600 00")])
        for i in 1...64 { #expect(server.indicate(handle: 6, value: [UInt8(i)], now: t0) == []) }
        #expect(server.indicate(handle: 6, value: [65], now: t0) == [.dropped(handle: 6, reason: .queueFull)])
        #expect(server.tick(now: t0 + .milliseconds(29_999)) == [])
        let timedOut = server.tick(now: t0 + .seconds(30))
        #expect(timedOut.first == .indicationTimedOut(handle: 6))
        #expect(
            timedOut.dropFirst() == ArraySlice(repeating: .dropped(handle: 6, reason: .transactionTimedOut), count: 64))
        #expect(server.indicationsStopped)
        #expect(
            server.indicate(handle: 6, value: [1], now: t0 + .seconds(31)) == [
                .dropped(handle: 6, reason: .transactionTimedOut)
            ])
        #expect(server.tick(now: t0 + .seconds(90)) == [])
        // A new connection: CCCDs, MTU and the stopped state are gone.
        _ = rx("02 f700")
        server.reset()
        #expect(server.mtu == 23 && !server.indicationsStopped)
        #expect(server.indicate(handle: 6, value: [1], now: t0) == [.dropped(handle: 6, reason: .notSubscribed)])
        #expect(rx("0a 0700") == [send("0b 0000")])
    }

    @Test mutating func controlPointValidatorAndDeferredWrites() {
        let control = vendorUUID
        server.writeValidator = { request in
            request.uuid == control && !request.indicateEnabled ? .cccdImproperlyConfigured : nil
        }
        #expect(rx("12 0f00 01") == [send("01 12 0f00 fd")], "indications off: 0xFD")
        #expect(rx("52 0f00 01") == [], "rejected command: silently dropped")
        _ = rx("12 1000 0200")
        server.deferredWriteHandles = [0x0F]
        #expect(rx("12 0f00 01") == [.written(handle: 0x0F, uuid: control, value: [1], withResponse: true)])
        guard case .protocolViolation = rx("0a 0300").first else {
            Issue.record("request during a pending write"); return
        }
        guard case .protocolViolation = server.respondToWrite(handle: 0x03, error: nil).first else {
            Issue.record("wrong handle"); return
        }
        #expect(server.respondToWrite(handle: 0x0F, error: nil) == [send("13")])
        #expect(server.database.attribute(0x0F)?.value == [1])
        #expect(rx("12 0f00 02") == [.written(handle: 0x0F, uuid: control, value: [2], withResponse: true)])
        #expect(server.respondToWrite(handle: 0x0F, error: .application(1)) == [send("01 12 0f00 81")])
        #expect(server.database.attribute(0x0F)?.value == [1], "a refused write is not stored")
        #expect(rx("52 0f00 03") == [.written(handle: 0x0F, uuid: control, value: [3], withResponse: false)])
    }

    @Test mutating func readByTypeListRules() {
        // Three 7-byte entries fill a 23-byte PDU.
        #expect(rx("08 0100 ffff 0328") == [send("09 07 0200 02 0300 002a 0500 20 0600 352a 0800 10 0900 362a")])
        // CCCDs are per connection: the list shows this client's configuration.
        _ = rx("12 0a00 0100")
        #expect(rx("08 0100 ffff 0229") == [send("09 04 0700 0000 0a00 0100 1000 0000")])

        var b = AttributeDatabase.Builder()
        b.addService(BluetoothUUID(0x180A))
        b.addCharacteristic(BluetoothUUID(0x2A29), properties: .read, permissions: .read, value: [1, 2])
        b.addCharacteristic(BluetoothUUID(0x2A29), properties: .read, permissions: .read, value: [3, 4])
        b.addCharacteristic(BluetoothUUID(0x2A29), properties: .read, permissions: [], value: [5, 6])
        b.addCharacteristic(BluetoothUUID(0x2A29), properties: .read, permissions: .read, value: [7, 8])
        var s = GATTServer(database: b.build())
        // The unreadable third value ends the list; the client asks again after it.
        #expect(s.receive(h("08 0100 ffff 292a"), now: t0) == [send("09 04 0300 0102 0500 0304")])
        #expect(s.receive(h("08 0600 ffff 292a"), now: t0) == [send("01 08 0700 02")])
        #expect(s.receive(h("08 0800 ffff 292a"), now: t0) == [send("09 04 0900 0708")])
    }
}
