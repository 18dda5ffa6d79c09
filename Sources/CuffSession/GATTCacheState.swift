// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import GATT

/// How one central session uses the GATT cache: what an earlier session learned, whether this
/// one trusts it, and what it learns itself. Shared by the sessions that keep a cache
/// (``CuffCentral``, ``OmronCentral``), which each drive their own GATT requests with it.
struct GATTCacheState: Sendable {
    /// What an earlier session learned (``CuffSessionConfiguration/gattCache``), nil when nothing.
    let known: LearnedCuff?
    /// How this session used the cache so far (the end record's `gatt_cache`).
    var use: GATTCacheUse
    /// True while the handles in use are the cache's, not confirmed by this connection's discovery.
    var usingCache = false
    var mtuExchanged = false
    /// The Database Hash read after discovery, for the cache.
    var databaseHash: [UInt8]?
    /// Discoveries made after the first (a changed database), bounded so a cuff that keeps saying
    /// Service Changed cannot keep the session discovering.
    var rediscoveries = 0
    static let maximumRediscoveries = 2

    init(_ mode: GATTCacheMode, address: String) {
        switch mode {
        case .off:
            known = nil
            use = .off
        case let .on(k):
            // A cache file of another device (a copied file) is not this cuff's.
            known = k?.address == address ? k : nil
            use = .miss
        }
    }

    /// A session that handed the link over found the cache wrong (``DiscoveredLink``).
    mutating func adopted(_ link: DiscoveredLink) {
        if link.gattCacheProvedStale, use != .off { use = .stale }
    }

    /// The cache's handles are in use from now on.
    mutating func hit() {
        use = .hit
        usingCache = true
    }

    /// The Database Hash the cuff has now (`value`) against the kept one: true when they match;
    /// otherwise the cache is stale.
    mutating func hashMatches(_ value: [UInt8]) -> Bool {
        if value == known?.databaseHash { return true }
        use = .stale
        return false
    }

    /// The handles in use proved wrong: true when the session may discover again (the cache is
    /// then stale, if it was in use), false once it has done so ``maximumRediscoveries`` times.
    mutating func invalidate() -> Bool {
        guard rediscoveries < Self.maximumRediscoveries else { return false }
        rediscoveries += 1
        if usingCache { use = .stale }
        usingCache = false
        return true
    }

    /// What the session learned: `profile` (the cache's or discovery's), the MTU, the Database
    /// Hash, and `values` read on this connection over those the cache gave; nil with the cache
    /// off or no profile yet.
    func learned(address: String, profile: GATTProfile?, mtu: UInt16, values read: [CuffCharacteristic: [UInt8]])
        -> LearnedCuff?
    {
        guard use != .off, let profile else { return nil }
        var values = known.map { use == .hit ? $0.values : [:] } ?? [:]
        values.merge(read) { $1 }
        let hash = use == .hit ? known?.databaseHash : databaseHash
        return LearnedCuff(
            address: address, mtu: use == .hit && !mtuExchanged ? known?.mtu ?? mtu : mtu, databaseHash: hash,
            profile: profile, values: values)
    }

    /// After a discovery with the cache on: the Database Hash to read (to check the cache with next
    /// time) and the Service Changed characteristic to subscribe to (so the cuff can say when its
    /// handles change), where `profile` has them.
    static func followUps(_ profile: GATTProfile) -> (
        hash: GATTProfile.Characteristic?, serviceChanged: GATTProfile.Characteristic?
    ) {
        let hash = profile.characteristic(.databaseHash, in: .genericAttribute).flatMap {
            $0.properties.contains(.read) ? $0 : nil
        }
        let sc = profile.characteristic(.serviceChanged, in: .genericAttribute).flatMap {
            $0.properties.contains(.indicate) && $0.cccdHandle != nil ? $0 : nil
        }
        return (hash, sc)
    }

    /// True for an error that says a cached handle is not what the cache says: no such handle,
    /// no such attribute, a database out of sync, and a refusal of what the cached properties
    /// allow there — a read or write not permitted, a value of the wrong length, a request not
    /// supported, and on a CCCD (which takes any 2-byte write the characteristic's properties
    /// allow) a write refused as Improperly Configured (the CCCD of a characteristic that does not
    /// notify, or indicate, as the cached one did: two characteristics' handles swapped). A cuff
    /// that refuses such a request on its own database is refused again after the rediscovery,
    /// and the session goes on as without a cache (probe B3: a clock write refused at a cached
    /// handle was passed over, and the readings that followed were decoded with the old cuff's
    /// quirks).
    static func showsStaleHandle(_ e: GATTClientError) -> Bool {
        guard e.code == .attError, let code = e.attError else { return e.code == .noCCCD }
        switch code {
        case .invalidHandle, .attributeNotFound, .databaseOutOfSync, .writeNotPermitted, .invalidAttributeValueLength,
            .requestNotSupported, .readNotPermitted, .cccdImproperlyConfigured:
            return true
        default: return false
        }
    }
}
