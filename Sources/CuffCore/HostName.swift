// SPDX-License-Identifier: GPL-2.0-or-later

/// What a host name in a URL says about where data goes.
public enum HostName {
    /// Whether `host` is this machine (a loopback address or `localhost`): health data sent to any
    /// other host without TLS crosses a network in the clear.
    public static func isThisMachine(_ host: String) -> Bool {
        let h = host.lowercased()
        return h == "localhost" || h.hasSuffix(".localhost") || h.hasPrefix("127.") || h == "::1"
    }
}
