// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import Foundation
import PostgresStore
import Sinks

/// `cuff history` and `cuff key`: what a store holds printed, and the keys of encrypted stores.
/// Lines for humans go to stderr; a failure is a failed sink (10, or 141 when stdout's reader went).
public enum StoreCommands {
    /// The key file: `option`, else `$CUFF_STORE_KEY_FILE` (empty counts as unset).
    public static func keyPath(option: String?, environment: [String: String] = ProcessInfo.processInfo.environment)
        -> String?
    {
        if let option { return option }
        guard let v = environment["CUFF_STORE_KEY_FILE"], !v.isEmpty else { return nil }
        return v
    }

    /// `cuff history`: the store's measurements in `format`, oldest first; throws
    /// ``ExitStatus/rowsSkipped`` after printing the rest when rows could not be read.
    public static func printHistory(store: String, format: OutputFormat, fhirSubject: String?, keyPath: String?)
        throws(ExitStatus)
    {
        var options = SinkConfiguration(
            format: format, fhirSubject: fhirSubject.map(FHIRSubject.init(parsing:)) ?? .cuffUser, storeKeyPath: keyPath
        )
        options.storeOpener = PostgresStoreOpener()
        let r: (printed: Int, skipped: Int)
        do {
            let h = try SinkFactory.printHistory(storePath: store, options: options)
            r = (h.printed, h.skipped)
        } catch {
            throw Console.sinkFailed("cuff history", error)
        }
        let skipped = r.skipped > 0 ? "; \(r.skipped) unreadable row\(r.skipped == 1 ? "" : "s") skipped" : ""
        Console.log(
            "cuff history: \(r.printed) measurement\(r.printed == 1 ? "" : "s") in \(SinkFactory.isServerStore(store) ? PostgresURL.redacting(store) : store)\(skipped)"
        )
        if r.skipped > 0 { throw .rowsSkipped }
    }

    /// `cuff key new`: a new random key file (mode 0600; never over an existing file).
    public static func newKey(path: String) throws(ExitStatus) {
        do { _ = try StoreKey.create(path: path) } catch { throw Console.sinkFailed("cuff key new", error) }
        Console.log("cuff key: wrote a new key to \(path) (mode 600); keep it apart from the store's backups")
    }

    /// `cuff key rotate`: every measurement of `store` sealed again under `newKeyFile`, in one transaction.
    public static func rotateKey(store: String, old: String, new newKeyFile: String) throws(ExitStatus) {
        let n: Int
        do {
            n = try SQLiteStore.rotateKey(
                path: store, from: try StoreKey.load(path: old), to: try StoreKey.load(path: newKeyFile))
        } catch {
            throw Console.sinkFailed("cuff key rotate", error)
        }
        Console.log("cuff key rotate: \(n) measurement\(n == 1 ? "" : "s") in \(store) now sealed with \(newKeyFile)")
    }
}
