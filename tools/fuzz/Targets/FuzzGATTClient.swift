// libFuzzer target: the GATT client state machine fed server PDUs. The client asks for the MTU
// and discovers every service, as a session does; the input is then a script of steps:
//   op % 8 in 0...3  a server PDU follows: one length byte, then that many bytes
//   4                confirm the pending indication
//   5                read the handle in the next two bytes
//   6                subscribe to a discovered characteristic (index in the next byte)
//   7                the clock moves on by (next byte) seconds; the client checks its timeouts
// Between steps the clock moves on 10 ms. The client must never trap, whatever the server says.
import CuffCore
import GATT

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = UnsafeBufferPointer(start: data, count: size)
    var client = GATTClient(preferredMTU: 247, securityLevel: .low)
    var now = Timestamp.zero
    var profile: GATTProfile?
    func take(_ actions: [GATTClientAction]) {
        for a in actions {
            if case let .completed(_, .success(.profile(p))) = a { profile = p }
            _ = String(describing: a)
        }
    }
    take(client.exchangeMTU(now: now).actions)
    take(client.discover(now: now).actions)
    var i = 0
    func byte() -> UInt8? {
        guard i < input.count else { return nil }
        defer { i += 1 }
        return input[i]
    }
    while let op = byte() {
        now = Timestamp(nanoseconds: now.nanoseconds + 10_000_000)
        switch op % 8 {
        case 0...3:
            guard let n = byte() else { return 0 }
            let end = min(input.count, i + Int(n))
            let pdu = Array(input[i..<end])
            i = end
            take(client.receive(pdu, now: now))
        case 4:
            take(client.confirmIndication())
        case 5:
            guard let lo = byte(), let hi = byte() else { return 0 }
            take(client.read(UInt16(lo) | UInt16(hi) << 8, now: now).actions)
        case 6:
            guard let k = byte() else { return 0 }
            let characteristics = profile?.services.flatMap(\.characteristics) ?? []
            guard !characteristics.isEmpty else { continue }
            let c = characteristics[Int(k) % characteristics.count]
            take(client.subscribe(c, notify: k & 0x40 != 0, indicate: k & 0x80 != 0, now: now).actions)
        default:
            guard let s = byte() else { return 0 }
            now = Timestamp(nanoseconds: now.nanoseconds + Int64(s) * 1_000_000_000)
            take(client.tick(now: now))
        }
    }
    return 0
}
