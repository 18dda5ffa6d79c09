// libFuzzer target: the D-Bus message parser bluetoothd's replies and signals go through (a
// hostile bluetoothd, or anything else on the system bus, writes these bytes). A message that
// parses with a body must encode back to bytes that parse to the same encoding; the accessors
// cuff reads bluetoothd's properties with must not trap on any value.
import DBus

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    guard let m = try? DBusMessage(parsing: input) else { return 0 }
    _ = m.bodyError.map { String(describing: $0) }
    guard let body = m.body else { return 0 }
    for v in body {
        _ = v.signature
        _ = v.entries
        _ = v.bytesValue
        _ = v.stringsValue
        _ = v.stringValue
        _ = v.boolValue
        _ = v["Value"]
        for (_, e) in v.entries ?? [] { _ = e.entries?.count }
    }
    let once = m.encoded(serial: m.serial)
    guard let again = try? DBusMessage(parsing: once) else {
        fatalError(
            "DBusMessage: the encoding of a parsed message does not parse (\(once.count) bytes from \(input.count))")
    }
    guard again.bodyError == nil, again.encoded(serial: m.serial) == once else {
        fatalError("DBusMessage: parse → encode → parse differs (\(String(describing: again.bodyError)))")
    }
    return 0
}
