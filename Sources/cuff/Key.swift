// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import CuffOptions
import CuffCommands

/// `cuff key new PATH`, `cuff key rotate`: the keys of encrypted stores.
struct KeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "key",
        abstract: "Make a store key, or re-encrypt a store under a new one.",
        discussion: """
            A store made with --store-key-file is encrypted: each measurement is sealed with AES-256-GCM \
            under a key derived from the key file, and nothing it holds (values, raw bytes, times, device \
            name, serial, address) can be read from the file without the key. Keep the key file apart \
            from the store's backups: without it the store cannot be read. Exit status 0, or 10 when a \
            key or the store cannot be made, read or changed (nothing is changed then).
            """,
        subcommands: [New.self, Rotate.self]
    )

    struct New: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "new",
            abstract: "Write a new random key file (mode 0600; an existing file is never overwritten).")

        @Argument(help: "Where to write the key.")
        var path: String

        func run() throws { try StoreCommands.newKey(path: path) }
    }

    struct Rotate: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate",
            abstract: "Re-encrypt a store under a new key, in place.",
            discussion: """
                Every measurement is sealed again in one transaction: if the rotation is interrupted \
                (a crash, kill -9, power loss), the store opens with the old key or the new one, never \
                neither. Make the new key with cuff key new first.
                """)

        @Option(help: "The encrypted store.")
        var store: String

        @OptionGroup var key: StoreKeyOption

        @Option(name: .customLong("new-key-file"), help: ArgumentHelp("The new key (cuff key new).", valueName: "path"))
        var newKeyFile: String

        func run() throws {
            guard let old = key.path else {
                throw ValidationError(
                    "give the store's current key with --store-key-file PATH (or CUFF_STORE_KEY_FILE)")
            }
            try StoreCommands.rotateKey(store: store, old: old, new: newKeyFile)
        }
    }
}
