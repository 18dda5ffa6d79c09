// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
    import Glibc
#endif

/// Where cuff keeps its state by default (the raw path's bonds, the GATT cache, the outboxes): one
/// rule for all of them.
public enum StateDirectory {
    /// `$XDG_STATE_HOME/cuff` when XDG_STATE_HOME is an absolute path (the XDG Base Directory
    /// specification ignores a relative one); else `$HOME/.local/state/cuff` when HOME is set and
    /// not empty; else the same under the account's home directory from the password database
    /// (a service started without HOME); else under `/`.
    public static func cuff(environment: (String) -> String? = { getenv($0).map { String(cString: $0) } }) -> String {
        if let state = environment("XDG_STATE_HOME"), state.hasPrefix("/") { return state + "/cuff" }
        let home = environment("HOME").flatMap { $0.isEmpty ? nil : $0 } ?? accountHome() ?? ""
        return home + "/.local/state/cuff"
    }

    /// The running account's home directory (getpwuid_r), or nil.
    static func accountHome() -> String? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(getuid(), &entry, &buffer, buffer.count, &result) == 0, result != nil, let dir = entry.pw_dir
        else { return nil }
        let home = String(cString: dir)
        return home.isEmpty ? nil : home
    }
}
