// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation
import Testing
@testable import Transport

/// One rule for cuff's state directory, whatever keeps its state there (bonds, GATT cache,
/// outboxes).
@Suite("StateDirectory")
struct StateDirectoryTests {
    @Test func xdgStateHomeWhenAbsoluteElseHome() {
        #expect(StateDirectory.cuff { ["XDG_STATE_HOME": "/state", "HOME": "/home/u"][$0] } == "/state/cuff")
        // A relative XDG_STATE_HOME is ignored, as the XDG Base Directory specification says.
        #expect(
            StateDirectory.cuff { ["XDG_STATE_HOME": "state", "HOME": "/home/u"][$0] } == "/home/u/.local/state/cuff")
        #expect(StateDirectory.cuff { ["HOME": "/home/u"][$0] } == "/home/u/.local/state/cuff")
    }

    /// A service started without HOME (or with an empty one) still gets the account's own home,
    /// from the password database, not a guess.
    @Test func withoutHomeTheAccountsHomeDirectory() throws {
        let account = try #require(StateDirectory.accountHome())
        #expect(account == (getpwuid(getuid())?.pointee.pw_dir).map { String(cString: $0) })
        #expect(StateDirectory.cuff { _ in nil } == account + "/.local/state/cuff")
        #expect(StateDirectory.cuff { ["HOME": ""][$0] } == account + "/.local/state/cuff")
    }
}

@Suite("PrivateFile")
struct PrivateFileTests {
    /// A relative path makes its directories relative to the working directory (was: `/a`, then
    /// `/a/b`, so `--bonds gc3/bonds` never kept a GATT cache: "open(gc3/gatt/….gatt.tmp): No such
    /// file or directory").
    @Test func aRelativePathMakesItsDirectoriesWhereItSays() throws {
        let top = ".build/cuff-private-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: top) }
        try PrivateFile.replace(top + "/gatt/x.gatt", with: "kept\n", what: "test file")
        #expect(try String(contentsOfFile: top + "/gatt/x.gatt", encoding: .utf8) == "kept\n")
        let mode = try FileManager.default.attributesOfItem(atPath: top + "/gatt")[.posixPermissions] as? Int
        #expect(mode == 0o700)
        #expect(!FileManager.default.fileExists(atPath: "/" + top))
    }
}
