// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore

/// Two uppercase hex digits (``Hex/digits(_:_:uppercase:)``).
@inline(__always) func hex2(_ v: UInt8) -> String { Hex.digits(v, 2) }

/// `0x` and four uppercase hex digits, the way handles are written in the spec (``Hex/handle(_:)``).
@inline(__always) func hex4(_ v: UInt16) -> String { Hex.handle(v) }
