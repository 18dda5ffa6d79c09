// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore

/// Two uppercase hex digits (``Hex/digits(_:_:uppercase:)``).
@inline(__always) func hex2(_ v: UInt8) -> String { Hex.digits(v, 2) }
