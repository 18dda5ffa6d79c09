// SPDX-License-Identifier: GPL-2.0-or-later
//
// The errors users meet on the live path, reached through the debug-build syscall mock table so
// they run (and mean the same) on a build machine without Bluetooth.

#if DEBUG
    import CuffCore
    import Glibc
    import Testing
    @testable import BlueZ
    @testable import Transport

    @Suite("BlueZ errors (mocked syscalls)")
    struct MockedBlueZTests {
        let central = BluetoothAdapter(index: 1)
        let local = BluetoothAddress("00:AA:01:01:00:01")!
        let peer = BluetoothAddress("00:AA:01:00:00:00")!

        @Test func bluetoothAbsentFromTheKernel() {
            let mock = SyscallMock(["socket": [.fail(.addressFamilyNotSupported)]])
            let error = mock.run {
                #expect(throws: TransportError.self) { _ = try L2CAPATTBearer.connect(adapter: central, to: peer) }
            }
            #expect(error?.code == .unsupported)
            #expect(error?.errno == EAFNOSUPPORT)
            #expect(
                error?.message.contains("this kernel has no Bluetooth (AF_BLUETOOTH): load the `bluetooth` module")
                    == true)
        }

        @Test func noSuchAdapter() {
            let mock = SyscallMock(["socket": [.value(900)], "ioctl": [.fail(.noSuchDevice)], "close": [.value(0)]])
            let error = mock.run { #expect(throws: TransportError.self) { _ = try BluetoothAdapter(index: 3).info() } }
            #expect(
                error?.message
                    == "ioctl(hci3, HCIGETDEVINFO): No such device (ENODEV) — there is no adapter hci3: list adapters with `btmgmt info` or `hciconfig`, then pass --adapter hciN"
            )
            #expect(mock.names == ["socket", "ioctl", "close"])
        }

        @Test func adapterDown() {
            // HCIGETDEVINFO "succeeds" with all-zero info: flags without HCI_UP.
            let mock = SyscallMock(["socket": [.value(900)], "ioctl": [.value(0)], "close": [.value(0)]])
            let error = mock.run {
                #expect(throws: TransportError.self) { _ = try L2CAPATTBearer.connect(adapter: central, to: peer) }
            }
            #expect(
                error?.message
                    == "hci1 is down — adapter hci1 is down: power it on with `btmgmt -i hci1 power on` (or `bluetoothctl power on`)"
            )
        }

        @Test func permissionDenied() {
            let mock = SyscallMock(["socket": [.fail(.notPermitted)]])
            let error = mock.run { #expect(throws: TransportError.self) { _ = try HCISocket(adapter: central) } }
            #expect(error?.message.contains("CAP_NET_RAW and CAP_NET_ADMIN") == true)
        }

        @Test(arguments: [
            (Errno.resourceBusy, "another program already owns the ATT channel"),
            (Errno.connectionRefused, "check the address type"),
            (Errno.permissionDenied, "pairing with 00:AA:01:00:00:00 was rejected"),
            (Errno.hostIsDown, "is not reachable through hci1"),
        ])
        func connectFailures(errno: Errno, advice: String) {
            let mock = SyscallMock([
                "socket": [.value(900)], "bind": [.value(0)], "connect": [.fail(errno)], "close": [.value(0)],
            ])
            let error = mock.run {
                #expect(throws: TransportError.self) {
                    _ = try L2CAPATTBearer.connect(
                        adapter: central, local: local, to: peer, timeout: .seconds(1), maxPDUSize: 1024,
                        securityTimeout: .seconds(1))
                }
            }
            #expect(error?.errno == errno.rawValue)
            #expect(
                error?.message.hasPrefix("connect(hci1 → 00:AA:01:00:00:00 (public), ATT CID 4): \(errno) — ") == true)
            #expect(error?.message.contains(advice) == true, "\(error?.message ?? "")")
            #expect(mock.names == ["socket", "bind", "connect", "close"], "the socket is closed after a failure")
        }

        @Test func connectTimesOutWithOurOwnDeadline() {
            let mock = SyscallMock([
                "socket": [.value(900)], "bind": [.value(0)], "connect": [.fail(.nowInProgress)], "close": [.value(0)],
            ])
            let error = mock.run {
                #expect(throws: TransportError.self) {
                    _ = try L2CAPATTBearer.connect(
                        adapter: central, local: local, to: peer, timeout: .zero, maxPDUSize: 1024,
                        securityTimeout: .seconds(1))
                }
            }
            #expect(error?.code == .timedOut)
            #expect(error?.message.contains("did not answer: is it advertising") == true)
            #expect(mock.names.last == "close")
        }

        @Test func bindFailureOnAdapterExplains() {
            let mock = SyscallMock([
                "socket": [.value(900)], "bind": [.fail(.addressNotAvailable)], "close": [.value(0)],
            ])
            let error = mock.run {
                #expect(throws: TransportError.self) {
                    _ = try L2CAPATTBearer.connect(
                        adapter: central, local: local, to: peer, timeout: .seconds(1), maxPDUSize: 1024,
                        securityTimeout: .seconds(1))
                }
            }
            #expect(error?.message.contains("has no usable address") == true)
        }

        // The L2CAP bearer runs the same engine as the Unix one; drive it over a socketpair.
        private func bearerPair() throws -> (L2CAPATTBearer, UnixSeqpacketBearer) {
            var fds: [CInt] = [-1, -1]
            try #require(socketpair(AF_UNIX, CInt(SOCK_SEQPACKET.rawValue), 0, &fds) == 0)
            return (
                L2CAPATTBearer(
                    adopting: fds[0], adapter: central, peer: peer, maxPDUSize: 64, securityTimeout: .seconds(1)),
                UnixSeqpacketBearer(adopting: fds[1], peerDescription: "fake peer")
            )
        }

        @Test func l2capBearerExchangesAndReportsDisconnectReasons() throws {
            let (bearer, other) = try bearerPair()
            defer { bearer.close() }
            try bearer.send([0x02, 0x05, 0x02])
            #expect(try other.next(timeout: .seconds(1)) == .pdu([0x02, 0x05, 0x02]))
            try other.send([0x03, 0xF7, 0x00])
            #expect(try bearer.next(timeout: .seconds(1)) == .pdu([0x03, 0xF7, 0x00]))
            try other.send([0x1D, 0x03, 0x00])
            let reset = SyscallMock(["recv": [.fail(.connectionReset)]])
            #expect(
                try reset.run { try bearer.next(timeout: .seconds(1)) }
                    == .closed("peer disconnected (remote user terminated)"))
            other.close()
            #expect(
                try bearer.next(timeout: .seconds(1)) == .pdu([0x1D, 0x03, 0x00]), "the mocked failure consumed nothing"
            )
            #expect(try bearer.next(timeout: .seconds(1)) == .closed("peer disconnected"))
            #expect(bearer.peerDescription == "00:AA:01:00:00:00")
        }

        @Test func securityThatNeverArrivesTimesOutWithAdvice() throws {
            let (bearer, other) = try bearerPair()
            defer { bearer.close(); other.close() }
            let mock = SyscallMock(["setsockopt": [.value(0)], "poll": [.value(0)]])
            let error = mock.run { #expect(throws: TransportError.self) { try bearer.raiseSecurity(to: .medium) } }
            #expect(error?.code == .timedOut)
            #expect(error?.message.contains("is a pairing agent running") == true)
        }

        @Test func securityBelowTheRequestIsRefused() throws {
            let (bearer, other) = try bearerPair()
            defer { bearer.close(); other.close() }
            // The socket turns writable but BT_SECURITY still reads low (here: not an L2CAP socket).
            let mock = SyscallMock(["setsockopt": [.value(0)]])
            let error = mock.run { #expect(throws: TransportError.self) { try bearer.raiseSecurity(to: .medium) } }
            #expect(error?.code == .securityRefused)
            #expect(error?.message.hasSuffix("the link came back at level low, below medium") == true)
        }

        @Test func hciCommandRefusedByController() throws {
            // Drive HCISocket.execute against a socketpair standing in for the controller.
            var fds: [CInt] = [-1, -1]
            try #require(socketpair(AF_UNIX, CInt(SOCK_SEQPACKET.rawValue), 0, &fds) == 0)
            defer { close(fds[1]) }
            let mock = SyscallMock(["socket": [.value(Int(fds[0]))], "bind": [.value(0)], "setsockopt": [.value(0)]])
            let hci = try mock.run { try HCISocket(adapter: central) }
            defer { hci.close() }
            // Controller answers LE Set Scan Enable with "command disallowed".
            let answer: [UInt8] = [0x04, 0x0E, 0x04, 0x01, 0x0C, 0x20, 0x0C]
            _ = answer.withUnsafeBytes { send(fds[1], $0.baseAddress, $0.count, 0) }
            let error = #expect(throws: TransportError.self) { try hci.execute(.leSetScanEnable(true)) }
            #expect(error?.message.contains("command disallowed (0x0c)") == true)
            #expect(error?.hciStatus == 0x0C)
            var sent = [UInt8](repeating: 0, count: 16)
            let n = recv(fds[1], &sent, 16, 0)
            #expect(Array(sent.prefix(n)) == [0x01, 0x0C, 0x20, 0x02, 0x01, 0x00])
        }

        /// MGMT over a socketpair standing in for the kernel's control channel.
        private func withFakeMGMT(replies: [[UInt8]], _ body: () throws -> Void) throws -> [[UInt8]] {
            var fds: [CInt] = [-1, -1]
            try #require(socketpair(AF_UNIX, CInt(SOCK_SEQPACKET.rawValue), 0, &fds) == 0)
            defer { close(fds[1]) }
            for r in replies { _ = r.withUnsafeBytes { send(fds[1], $0.baseAddress, $0.count, 0) } }
            let mock = SyscallMock(["socket": [.value(Int(fds[0]))], "bind": [.value(0)]])
            try mock.run { try body() }
            var sent: [[UInt8]] = []
            var buffer = [UInt8](repeating: 0, count: 64)
            while true {
                let n = recv(fds[1], &buffer, 64, CInt(MSG_DONTWAIT))
                if n <= 0 { break }
                sent.append(Array(buffer.prefix(n)))
            }
            return sent
        }

        @Test func powerOnReadsInfoThenSetsPowered() throws {
            // Read Controller Information reply for hci1: address, version, manufacturer,
            // supported settings, current settings = 0x00000200 (LE, not powered), …
            let infoPacket = MGMTPacket(
                code: 0x0001, index: 1,
                parameters: [0x04, 0x00, 0x00] + Array(repeating: 0, count: 9) + [0, 0, 0, 0] + [
                    0x00, 0x02, 0x00, 0x00,
                ] + Array(repeating: 0, count: 263)
            ).encoded
            let powered = MGMTPacket(code: 0x0001, index: 1, parameters: [0x05, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00])
                .encoded
            let sent = try withFakeMGMT(replies: [infoPacket, powered]) { try central.powerOn() }
            #expect(sent == [[0x04, 0x00, 0x01, 0x00, 0x00, 0x00], [0x05, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01]])
        }

        @Test func powerOnSkipsAPoweredAdapterAndExplainsRefusals() throws {
            let poweredInfo = MGMTPacket(
                code: 0x0001, index: 1,
                parameters: [0x04, 0x00, 0x00] + Array(repeating: 0, count: 9) + [0, 0, 0, 0] + [
                    0x01, 0x02, 0x00, 0x00,
                ] + Array(repeating: 0, count: 263)
            ).encoded
            let sent = try withFakeMGMT(replies: [poweredInfo]) { try central.powerOn() }
            #expect(sent.count == 1)
            // An untrusted socket: Command Status "permission denied".
            let denied = MGMTPacket(code: 0x0002, index: 1, parameters: [0x04, 0x00, 0x14]).encoded
            _ = try withFakeMGMT(replies: [denied]) {
                let error = #expect(throws: TransportError.self) { try central.powerOn() }
                #expect(
                    error?.message
                        == "MGMT command 0x4 on hci1: permission denied (0x14) — \(BlueZErrors.permissionHint)")
            }
        }

        @Test func adapterNames() throws {
            #expect(try BluetoothAdapter(parsing: "hci0").index == 0)
            #expect(try BluetoothAdapter(parsing: "12").name == "hci12")
            for bad in ["", "hci", "hcix", "usb0", "hci-1", "hci65535", "hci٣"] {
                #expect(throws: TransportError.self) { _ = try BluetoothAdapter(parsing: bad) }
            }
        }
    }
#endif
