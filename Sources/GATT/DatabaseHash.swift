// SPDX-License-Identifier: GPL-2.0-or-later

/// AES-128 (FIPS-197), encryption of one block only: what AES-CMAC needs. Not constant-time, and
/// no secret goes through it: the Database Hash's key is all zeros by definition.
public struct AES128: Sendable {
    /// The 11 round keys, 16 bytes each.
    private let roundKeys: [UInt8]

    public init(key: [UInt8]) {
        precondition(key.count == 16, "AES-128 takes a 16-byte key")
        var w = key
        w.reserveCapacity(176)
        var rcon: UInt8 = 1
        for i in 4..<44 {
            var t = Array(w[(i - 1) * 4..<i * 4])
            if i % 4 == 0 {
                t = [t[1], t[2], t[3], t[0]].map { AES128.sbox[Int($0)] }
                t[0] ^= rcon
                rcon = AES128.xtime(rcon)
            }
            for j in 0..<4 { w.append(w[(i - 4) * 4 + j] ^ t[j]) }
        }
        roundKeys = w
    }

    /// `block` (16 bytes) encrypted.
    public func encrypt(_ block: [UInt8]) -> [UInt8] {
        precondition(block.count == 16, "AES works on 16-byte blocks")
        var s = block
        func addRoundKey(_ r: Int) { for i in 0..<16 { s[i] ^= roundKeys[r * 16 + i] } }
        addRoundKey(0)
        for round in 1...10 {
            // SubBytes and ShiftRows (byte r of column c is s[4c + r]; row r turns left by r).
            let t = s
            for c in 0..<4 {
                for r in 0..<4 { s[4 * c + r] = AES128.sbox[Int(t[4 * ((c + r) % 4) + r])] }
            }
            if round < 10 {  // MixColumns
                for c in 0..<4 {
                    let a0 = s[4 * c], a1 = s[4 * c + 1], a2 = s[4 * c + 2], a3 = s[4 * c + 3]
                    let all = a0 ^ a1 ^ a2 ^ a3
                    s[4 * c] = a0 ^ all ^ AES128.xtime(a0 ^ a1)
                    s[4 * c + 1] = a1 ^ all ^ AES128.xtime(a1 ^ a2)
                    s[4 * c + 2] = a2 ^ all ^ AES128.xtime(a2 ^ a3)
                    s[4 * c + 3] = a3 ^ all ^ AES128.xtime(a3 ^ a0)
                }
            }
            addRoundKey(round)
        }
        return s
    }

    /// Multiplication by x in GF(2⁸) modulo x⁸ + x⁴ + x³ + x + 1.
    static func xtime(_ b: UInt8) -> UInt8 { (b << 1) ^ (b & 0x80 != 0 ? 0x1B : 0) }

    /// The S-box, built from its definition (FIPS-197 §5.1.1): the multiplicative inverse in
    /// GF(2⁸), then the affine transformation.
    static let sbox: [UInt8] = {
        func multiply(_ a: UInt8, _ b: UInt8) -> UInt8 {
            var (a, b, p): (UInt8, UInt8, UInt8) = (a, b, 0)
            while b != 0 {
                if b & 1 != 0 { p ^= a }
                a = xtime(a)
                b >>= 1
            }
            return p
        }
        var inverse = [UInt8](repeating: 0, count: 256)
        for a in 1...255 {
            for b in 1...255 where multiply(UInt8(a), UInt8(b)) == 1 {
                inverse[a] = UInt8(b)
                break
            }
        }
        func rotl(_ x: UInt8, _ n: UInt8) -> UInt8 { (x << n) | (x >> (8 - n)) }
        return inverse.map { b in b ^ rotl(b, 1) ^ rotl(b, 2) ^ rotl(b, 3) ^ rotl(b, 4) ^ 0x63 }
    }()
}

/// AES-CMAC (RFC 4493; NIST SP 800-38B with AES-128), the function Core Vol 3 Part H §2.2.5 names.
public enum AESCMAC {
    /// The 16-byte tag of `message` under `key`.
    public static func tag(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        let aes = AES128(key: key)
        func double(_ b: [UInt8]) -> [UInt8] {
            var out = [UInt8](repeating: 0, count: 16)
            for i in 0..<16 { out[i] = (b[i] << 1) | (i < 15 ? b[i + 1] >> 7 : 0) }
            if b[0] & 0x80 != 0 { out[15] ^= 0x87 }
            return out
        }
        let k1 = double(aes.encrypt([UInt8](repeating: 0, count: 16)))
        let k2 = double(k1)
        let blocks = max(1, (message.count + 15) / 16)
        let whole = !message.isEmpty && message.count % 16 == 0
        var x = [UInt8](repeating: 0, count: 16)
        for i in 0..<(blocks - 1) {
            for j in 0..<16 { x[j] ^= message[i * 16 + j] }
            x = aes.encrypt(x)
        }
        var last = Array(message[((blocks - 1) * 16)...])
        if !whole { last += [0x80] + [UInt8](repeating: 0, count: 15 - last.count) }
        let subkey = whole ? k1 : k2
        for j in 0..<16 { x[j] ^= last[j] ^ subkey[j] }
        return aes.encrypt(x)
    }
}

extension AttributeDatabase {
    /// The Database Hash (0x2B2A) of this database, as Core Vol 3 Part G §7.3.1 defines it:
    /// AES-CMAC with a key of zeros over, in handle order, each service, include and
    /// characteristic declaration's and each Characteristic Extended Properties descriptor's
    /// handle, type and value, and each other GATT-defined descriptor's (User Description, CCCD,
    /// SCCD, Presentation and Aggregate Format) handle and type, all little-endian.
    ///
    /// The value is the CMAC's result in little-endian order, as multi-octet characteristic
    /// values are (Vol 3 Part F §3.3.1), as Zephyr sends it and the qualification tests expect
    /// (Zephyr PR #17859); BlueZ's server sends the other order. A client compares the value it
    /// read with the one it kept, so either order serves a cache that only compares.
    public var databaseHash: [UInt8] {
        let withValue: Set<BluetoothUUID> = [
            .primaryService, .secondaryService, .include, .characteristic, .characteristicExtendedProperties,
        ]
        let withoutValue: Set<BluetoothUUID> = [
            .characteristicUserDescription, .clientCharacteristicConfiguration, BluetoothUUID(0x2903),
            BluetoothUUID(0x2904), BluetoothUUID(0x2905),
        ]
        var m: [UInt8] = []
        for a in attributes {  // (in handle order, as the database keeps them)
            let value = withValue.contains(a.type)
            guard value || withoutValue.contains(a.type) else { continue }
            m += [UInt8(a.handle & 0xFF), UInt8(a.handle >> 8)] + a.type.littleEndianBytes
            if value { m += a.value }
        }
        return AESCMAC.tag(key: [UInt8](repeating: 0, count: 16), m).reversed()
    }
}
