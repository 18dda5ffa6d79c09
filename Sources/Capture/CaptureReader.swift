// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore

/// The container format of a capture file.
public enum CaptureFormat: String, Sendable, CaseIterable {
    /// Detect from the first bytes.
    case auto
    case btsnoop
    case pcap
    case pcapng
}

extension CaptureFormat {
    /// The format a file's first bytes name: btsnoop, pcap (either byte order, µs or ns), pcapng;
    /// nil for anything else. Fewer than 8 bytes that begin the btsnoop magic count as btsnoop (a
    /// file cut inside its header).
    public static func detect(_ head: ArraySlice<UInt8>) -> CaptureFormat? {
        if head.isEmpty { return nil }
        if head.starts(with: BTSnoop.magic) || (head.count < BTSnoop.magic.count && BTSnoop.magic.starts(with: head)) {
            return .btsnoop
        }
        if Pcap.isMagic(head) { return .pcap }
        if head.starts(with: [0x0A, 0x0D, 0x0D, 0x0A]) { return .pcapng }
        return nil
    }
}

/// Streams ``HCIRecord``s out of a btsnoop, pcap or pcapng capture.
///
/// Memory stays bounded whatever the file size: the reader holds one record plus one read chunk,
/// and rejects records longer than ``HCIRecord/maximumPayloadLength`` as `oversize_record` before
/// reading them.
///
/// Iterator contract: ``next()`` returns records in file order, then `nil` at a clean end. A file
/// cut short yields every complete record before the cut, then throws `truncated_header` or
/// `truncated_record`; after a non-recoverable error ``next()`` returns `nil`. After an error with
/// ``CaptureError/isRecoverable`` (a malformed packet inside a well-framed record, a pcapng packet on
/// an unknown interface) ``next()`` goes on with the following record.
public struct CaptureReader<Source: ByteSource>: Sendable {
    private var input: ChunkedInput<Source>
    private var state: State
    /// The container format, once the file header has been read.
    public private(set) var format: CaptureFormat?
    /// The btsnoop datalink or the pcap link type, once known (pcapng: the last interface declared).
    public private(set) var datalink: UInt32?

    private enum State: Sendable {
        case start(CaptureFormat)
        case btsnoop(BTSnoopDatalink)
        case pcap(Pcap.FileHeader)
        case pcapng(PcapngState)
        case finished
    }

    struct PcapngState: Sendable {
        var endian = Pcapng.Endian(big: false)
        /// Interfaces of the current section; nil where the link type is not one we decode.
        var interfaces: [Pcapng.Interface?] = []
    }

    /// Most pcapng interfaces per section (their ids become 16-bit adapter indexes).
    public static var maximumInterfaces: Int { 65536 }

    public init(source: Source, format: CaptureFormat = .auto, chunkSize: Int = 64 * 1024) {
        input = ChunkedInput(source, chunkSize: chunkSize)
        state = .start(format)
    }

    /// A reader of btsnoop records that starts after the file header: `source` holds the file's
    /// bytes from `offset` on (the start of a record). Records and errors name file offsets as a
    /// reader of the whole file would.
    public init(btsnoopRecords source: Source, datalink: BTSnoopDatalink, offset: Int64, chunkSize: Int = 64 * 1024) {
        input = ChunkedInput(source, chunkSize: chunkSize, offset: offset)
        state = .btsnoop(datalink)
        format = .btsnoop
        self.datalink = datalink.rawValue
    }

    /// File offset of the next unread byte.
    public var offset: Int64 { input.offset }

    /// The byte source (for inspection; reading from it directly desynchronises the reader).
    public var source: Source { input.source }

    /// Reads the file header now (``next()`` does otherwise), so ``format`` and ``datalink`` are known.
    public mutating func readHeader() throws(CaptureError) {
        if case let .start(format) = state {
            do {
                try readFileHeader(format)
            } catch {
                state = .finished
                throw error
            }
        }
    }

    /// The next record, or nil at the end of the capture.
    public mutating func next() throws(CaptureError) -> HCIRecord? {
        do {
            while true {
                switch state {
                case .finished:
                    return nil
                case .start(let format):
                    try readFileHeader(format)
                case .btsnoop(let datalink):
                    return try nextBTSnoop(datalink)
                case .pcap(let header):
                    return try nextPcap(header)
                case .pcapng(var st):
                    state = .finished  // keep `st` uniquely referenced while it changes
                    defer { if case .finished = state { state = .pcapng(st) } }
                    let record = try nextPcapng(&st)
                    if let record { return record }
                    if try input.isAtEnd() { return nil }
                }
            }
        } catch {
            if !error.isRecoverable { state = .finished }
            throw error
        }
    }

    /// ``next()`` refilling `record` in place: its payload's storage is reused, so reading a
    /// btsnoop file allocates nothing per record once the payload has grown to the largest one.
    /// Returns false at a clean end (and leaves `record` as it was); throws as ``next()`` does.
    public mutating func next(into record: inout HCIRecord) throws(CaptureError) -> Bool {
        try next(into: &record, lending: { _ in false }) != .end
    }

    /// Reads every remaining record (tests and small files; prefer ``next()`` for big ones).
    public mutating func readAll() throws(CaptureError) -> [HCIRecord] {
        var out: [HCIRecord] = []
        while let r = try next() { out.append(r) }
        return out
    }

    // MARK: - File header

    private mutating func readFileHeader(_ forced: CaptureFormat) throws(CaptureError) {
        let head = try input.peek(8)
        if head.isEmpty {
            throw CaptureError(.truncatedHeader, "expected a capture file header, the file is empty", offset: 0)
        }
        let format: CaptureFormat
        if forced != .auto {
            format = forced
        } else if let detected = CaptureFormat.detect(head) {
            format = detected
        } else if head.count < 4 {
            throw CaptureError(
                .truncatedHeader, "expected a capture file header, the file has only \(head.count) bytes", offset: 0)
        } else {
            throw CaptureError(
                .badMagic, "expected btsnoop, pcap or pcapng magic, found \(Hex.encode(head))", offset: 0)
        }
        self.format = format
        switch format {
        case .auto: preconditionFailure("resolved above")
        case .btsnoop:
            guard let bytes = try input.take(BTSnoop.fileHeaderLength) else {
                let have = try input.fill(BTSnoop.fileHeaderLength)
                if !BTSnoop.magic.starts(with: try input.peek(8)) {
                    throw CaptureError(
                        .badMagic, "expected btsnoop magic, found \(Hex.encode(try input.peek(8)))", offset: 0)
                }
                throw CaptureError(
                    .truncatedHeader, "expected a 16-byte btsnoop file header, the file has \(have) bytes", offset: 0)
            }
            let datalink = try BTSnoop.parseFileHeader(bytes)
            self.datalink = datalink.rawValue
            state = .btsnoop(datalink)
        case .pcap:
            guard let bytes = try input.take(Pcap.fileHeaderLength) else {
                let have = try input.fill(Pcap.fileHeaderLength)
                if !Pcap.isMagic(try input.peek(4)) {
                    throw CaptureError(
                        .badMagic, "expected pcap magic, found \(Hex.encode(try input.peek(4)))", offset: 0)
                }
                throw CaptureError(
                    .truncatedHeader, "expected a 24-byte pcap file header, the file has \(have) bytes", offset: 0)
            }
            let header = try Pcap.parseFileHeader(bytes)
            datalink = header.linkType
            state = .pcap(header)
        case .pcapng:
            guard head.count >= 4, head.prefix(4).elementsEqual([0x0A, 0x0D, 0x0D, 0x0A]) else {
                throw CaptureError(
                    .badMagic, "expected a pcapng Section Header Block 0a0d0d0a, found \(Hex.encode(head.prefix(4)))",
                    offset: 0)
            }
            state = .pcapng(PcapngState())
        }
    }

    // MARK: - btsnoop

    private mutating func nextBTSnoop(_ datalink: BTSnoopDatalink) throws(CaptureError) -> HCIRecord? {
        var record = HCIRecord(timestamp: .zero, direction: .received, kind: .other(0), payload: [])
        return try nextBTSnoop(datalink, into: &record, lending: { _ in false }) == .end ? nil : record
    }

    /// How ``next(into:lending:)`` gave a record.
    enum Lent: Equatable { case end, record, taken }

    /// ``next(into:)``, that first lends a btsnoop record whole in the read buffer to `take` (no
    /// copy of its payload): when `take` returns true the record was dealt with and `record` is
    /// left as it was (`.taken`); otherwise, or for a record that is not in the buffer whole or
    /// not btsnoop, `record` is filled as `next(into:)` fills it (`.record`).
    mutating func next(into record: inout HCIRecord, lending take: (RecordView) -> Bool) throws(CaptureError) -> Lent {
        switch state {
        case .btsnoop(let datalink):
            do {
                return try nextBTSnoop(datalink, into: &record, lending: take)
            } catch {
                if !error.isRecoverable { state = .finished }
                throw error
            }
        case .pcap(let file):
            // A well-formed record whole in the buffer is lent from there; the rest (a cut, an
            // oversize length, a cut pseudo-header) goes the checked way, which names the problem.
            let at = input.offset
            var short = input.withBuffered { Self.bufferedPcap($0, file, into: &record, at: at, lending: take) }
            if case let .need(n) = short, try input.fill(n) >= n {
                short = input.withBuffered { Self.bufferedPcap($0, file, into: &record, at: at, lending: take) }
            }
            if case .done = short { return .record }
            if case .taken = short { return .taken }
        case .pcapng(let st):
            // The same for an Enhanced Packet Block on a known interface; every other block (and
            // anything the checked way must name) goes that way.
            let at = input.offset
            var short = input.withBuffered { Self.bufferedPcapng($0, st, into: &record, at: at, lending: take) }
            if case let .need(n) = short, try input.fill(n) >= n {
                short = input.withBuffered { Self.bufferedPcapng($0, st, into: &record, at: at, lending: take) }
            }
            if case .done = short { return .record }
            if case .taken = short { return .taken }
        case .start, .finished:
            break
        }
        guard let r = try next() else { return .end }
        record = r
        return .record
    }

    private mutating func nextBTSnoop(
        _ datalink: BTSnoopDatalink, into record: inout HCIRecord,
        lending take: (RecordView) -> Bool
    ) throws(CaptureError) -> Lent {
        let recordOffset = input.offset
        // Short path: a well-formed record read straight from the buffer, refilled first when the
        // record runs past it. Anything else (a cut, an oversize length, an empty H4 record) takes
        // the checked path below, which names the problem.
        var short = bufferedBTSnoop(datalink, into: &record, at: recordOffset, lending: take)
        if case let .need(n) = short, try input.fill(n) >= n {
            short = bufferedBTSnoop(datalink, into: &record, at: recordOffset, lending: take)
        }
        if case .done = short { return .record }
        if case .taken = short { return .taken }
        guard let headerBytes = try input.take(BTSnoop.recordHeaderLength) else {
            let have = try input.fill(BTSnoop.recordHeaderLength)
            if have == 0 { state = .finished; return .end }
            throw CaptureError(
                .truncatedHeader, "expected a 24-byte btsnoop record header, the file ends after \(have) bytes",
                offset: recordOffset)
        }
        let header = BTSnoop.parseRecordHeader(headerBytes)
        guard header.includedLength <= HCIRecord.maximumPayloadLength else {
            throw CaptureError(
                .oversizeRecord,
                "expected an included length ≤ \(HCIRecord.maximumPayloadLength), found \(header.includedLength)",
                offset: recordOffset)
        }
        let length = Int(header.includedLength)
        guard let body = try input.take(length) else {
            let have = try input.fill(length)
            throw CaptureError(
                .truncatedRecord, "expected \(length) record bytes after the header, the file ends after \(have)",
                offset: recordOffset)
        }
        // (The record is read whole first, so the reader goes on with the next one.)
        guard BTSnoop.usableTimestamp(fromBTSnoop: header.timestamp) != nil else {
            throw BTSnoop.badTimestamp(header.timestamp, recordOffset: recordOffset)
        }
        try BTSnoop.decode(header, body: body, datalink: datalink, fileOffset: recordOffset, into: &record)
        return .record
    }

    /// Gives `each` the btsnoop records already whole in the buffer, in order, as long as each
    /// passes the short path's checks (so each is what ``next(into:lending:)`` would give, with no
    /// error) and `each` returns true; the reader stands after the last one given. Anything else
    /// (a record cut by the buffer's end, a header the checked path must name, not btsnoop) stops
    /// it, for ``next(into:lending:)`` to read. Returns false when `each` asked to stop.
    /// One loop over the buffer: no per-record state, offset or closure layers.
    mutating func forEachBuffered(
        _ each: (BTSnoop.RecordHeader, UnsafeRawBufferPointer, BTSnoopDatalink, Int64) -> Bool
    ) -> Bool {
        guard case .btsnoop(let datalink) = state else { return true }
        let base = input.offset
        return input.withBuffered { raw -> (consumed: Int, result: Bool) in
            guard let start = raw.baseAddress else { return (0, true) }
            let count = raw.count
            var at = 0
            while count - at >= BTSnoop.recordHeaderLength {
                let header = BTSnoop.RecordHeader(
                    loading: UnsafeRawBufferPointer(start: start + at, count: BTSnoop.recordHeaderLength))
                let included = Int(header.includedLength)
                let total = BTSnoop.recordHeaderLength + included
                guard BTSnoop.takesShortPath(header, datalink: datalink), count - at >= total else { break }
                let body = UnsafeRawBufferPointer(start: start + at + BTSnoop.recordHeaderLength, count: included)
                let goOn = each(header, body, datalink, base + Int64(at))
                at += total
                if !goOn { return (at, false) }
            }
            return (at, true)
        }
    }

    /// Reads one btsnoop record from the bytes already buffered, when they hold all of it.
    private mutating func bufferedBTSnoop(
        _ datalink: BTSnoopDatalink, into record: inout HCIRecord, at recordOffset: Int64,
        lending take: (RecordView) -> Bool
    ) -> ShortPath {
        input.withBuffered { raw -> (consumed: Int, result: ShortPath) in
            guard raw.count >= BTSnoop.recordHeaderLength else { return (0, .need(BTSnoop.recordHeaderLength)) }
            let header = BTSnoop.RecordHeader(loading: raw)
            let included = Int(header.includedLength)
            let total = BTSnoop.recordHeaderLength + included
            guard BTSnoop.takesShortPath(header, datalink: datalink) else { return (0, .checked) }
            guard raw.count >= total else { return (0, .need(total)) }
            let body = UnsafeRawBufferPointer(rebasing: raw[BTSnoop.recordHeaderLength..<total])
            if take(RecordView(header: header, body: body, datalink: datalink, fileOffset: recordOffset)) {
                return (total, .taken)
            }
            BTSnoop.fill(&record, header: header, body: body, datalink: datalink, fileOffset: recordOffset)
            return (total, .done)
        }
    }

    // MARK: - pcap

    private mutating func nextPcap(_ file: Pcap.FileHeader) throws(CaptureError) -> HCIRecord? {
        let recordOffset = input.offset
        guard let headerBytes = try input.take(Pcap.recordHeaderLength) else {
            let have = try input.fill(Pcap.recordHeaderLength)
            if have == 0 { state = .finished; return nil }
            throw CaptureError(
                .truncatedHeader, "expected a 16-byte pcap record header, the file ends after \(have) bytes",
                offset: recordOffset)
        }
        let header = Pcap.parseRecordHeader(headerBytes, file)
        guard header.includedLength <= HCIRecord.maximumPayloadLength else {
            throw CaptureError(
                .oversizeRecord,
                "expected an included length ≤ \(HCIRecord.maximumPayloadLength), found \(header.includedLength)",
                offset: recordOffset)
        }
        let length = Int(header.includedLength)
        guard let body = try input.take(length) else {
            let have = try input.fill(length)
            throw CaptureError(
                .truncatedRecord, "expected \(length) packet bytes after the header, the file ends after \(have)",
                offset: recordOffset)
        }
        return try LinkType.decode(
            linkType: file.linkType, data: body, originalLength: Int(header.originalLength),
            timestamp: header.timestamp, interface: 0, fileOffset: recordOffset)
    }

    /// One pcap record whole at the start of `raw`, lent to `take` (or, when it declines,
    /// filled into `record`) with the bytes it used; `.checked` for a record the checked path
    /// must read (an oversize length, a pseudo-header cut short).
    @inline(__always)
    private static func bufferedPcap(
        _ raw: UnsafeRawBufferPointer, _ file: Pcap.FileHeader, into record: inout HCIRecord, at offset: Int64,
        lending take: (RecordView) -> Bool
    ) -> (consumed: Int, result: ShortPath) {
        guard raw.count >= Pcap.recordHeaderLength else { return (0, .need(Pcap.recordHeaderLength)) }
        let header = Pcap.RecordHeader(loading: raw, file)
        guard header.includedLength <= HCIRecord.maximumPayloadLength else { return (0, .checked) }
        let total = Pcap.recordHeaderLength + Int(header.includedLength)
        guard raw.count >= total else { return (0, .need(total)) }
        guard
            let view = LinkType.view(
                linkType: file.linkType, data: UnsafeRawBufferPointer(rebasing: raw[Pcap.recordHeaderLength..<total]),
                originalLength: Int(header.originalLength), timestamp: header.timestamp, interface: 0,
                fileOffset: offset)
        else { return (0, .checked) }
        return lend(view, consumed: total, into: &record, take)
    }

    /// Lends `view` to `take`, or fills it into `record` when `take` declines.
    @inline(__always)
    private static func lend(
        _ view: RecordView, consumed: Int, into record: inout HCIRecord, _ take: (RecordView) -> Bool
    ) -> (consumed: Int, result: ShortPath) {
        if take(view) { return (consumed, .taken) }
        record.refill(from: view)
        return (consumed, .done)
    }

    // MARK: - pcapng

    /// One Enhanced Packet Block whole at the start of `raw`, as ``bufferedPcap`` reads a pcap
    /// record; `.checked` for any other block and for anything ``nextPcapng(_:)`` would throw at
    /// or skip (a bad length or trailer, an unknown interface, an unusable timestamp, a cut
    /// pseudo-header).
    @inline(__always)
    private static func bufferedPcapng(
        _ raw: UnsafeRawBufferPointer, _ st: PcapngState, into record: inout HCIRecord, at offset: Int64,
        lending take: (RecordView) -> Bool
    ) -> (consumed: Int, result: ShortPath) {
        // Type, length, interface id, timestamp (2), captured and original length, then the
        // packet and, after any options, the length again.
        let fields = 28
        guard raw.count >= 8 else { return (0, .need(8)) }
        let big = st.endian.big
        @inline(__always) func u32(_ at: Int) -> UInt32 {
            let v = raw.loadUnaligned(fromByteOffset: at, as: UInt32.self)
            return big ? UInt32(bigEndian: v) : UInt32(littleEndian: v)
        }
        let length = Int(u32(4))
        guard u32(0) == Pcapng.enhancedPacketType, length >= fields + 4, length % 4 == 0,
            length <= Pcapng.maximumBufferedBlock
        else { return (0, .checked) }
        guard raw.count >= length else { return (0, .need(length)) }
        let id = Int(u32(8))
        let captured = Int(u32(20))
        guard u32(length - 4) == UInt32(length), captured <= length - 4 - fields, id < st.interfaces.count,
            let interface = st.interfaces[id],
            let timestamp = interface.timestamp(ticks: UInt64(u32(12)) << 32 | UInt64(u32(16))),
            let view = LinkType.view(
                linkType: interface.linkType, data: UnsafeRawBufferPointer(rebasing: raw[fields..<(fields + captured)]),
                originalLength: Int(u32(24)), timestamp: timestamp, interface: UInt16(truncatingIfNeeded: id),
                fileOffset: offset)
        else { return (0, .checked) }
        return lend(view, consumed: length, into: &record, take)
    }

    /// Reads one block; returns a record for a packet block, nil for any other block.
    private mutating func nextPcapng(_ st: inout PcapngState) throws(CaptureError) -> HCIRecord? {
        let blockOffset = input.offset
        let head = try input.peek(12)
        if head.isEmpty { return nil }
        guard head.count >= 8 else {
            throw CaptureError(
                .truncatedHeader, "expected an 8-byte pcapng block header, the file ends after \(head.count) bytes",
                offset: blockOffset)
        }
        var r = ByteReader(head)
        let rawType = r.readUInt32BigEndian()!
        let isSection = rawType == Pcapng.sectionHeaderType
        if isSection {
            guard head.count >= 12 else {
                throw CaptureError(
                    .truncatedHeader,
                    "expected a 12-byte Section Header Block start, the file ends after \(head.count) bytes",
                    offset: blockOffset)
            }
            var m = ByteReader(head.dropFirst(8))
            switch m.readUInt32BigEndian()! {
            case Pcapng.byteOrderMagic: st.endian = .init(big: true)
            case Pcapng.byteOrderMagic.byteSwapped: st.endian = .init(big: false)
            case let other:
                throw CaptureError(
                    .badMagic, "expected byte-order magic 1a2b3c4d in either order, found \(String(other, radix: 16))",
                    offset: blockOffset + 8)
            }
        } else if st.interfaces.isEmpty && blockOffset == 0 {
            throw CaptureError(.badMagic, "expected a pcapng Section Header Block first", offset: 0)
        }
        r = ByteReader(head)
        let type = st.endian.u32(&r)!
        let length = st.endian.u32(&r)!
        guard length >= 12, length % 4 == 0 else {
            throw CaptureError(
                .badBlockLength, "expected a block length ≥ 12 and a multiple of 4, found \(length)",
                offset: blockOffset + 4)
        }
        let known = [
            Pcapng.sectionHeaderType, Pcapng.interfaceDescriptionType, Pcapng.enhancedPacketType,
            Pcapng.simplePacketType, Pcapng.obsoletePacketType,
        ].contains(type)
        // A packet on an interface whose packets are skipped (another link type: an Ethernet or
        // USB capture beside the Bluetooth one) may be as long as its own link allows: skipped
        // unread like an unknown block, not held to the Bluetooth cap (probe Q: a 140 KB Ethernet
        // packet ended the replay, and the readings after it were lost).
        var skippedLongPacket = false
        if length > Pcapng.maximumBufferedBlock,
            type == Pcapng.enhancedPacketType || type == Pcapng.simplePacketType || type == Pcapng.obsoletePacketType
        {
            var h = ByteReader(head.dropFirst(8))
            let id =
                type == Pcapng.enhancedPacketType
                ? st.endian.u32(&h) : type == Pcapng.obsoletePacketType ? st.endian.u16(&h).map(UInt32.init) : 0
            if let id, Int(id) < st.interfaces.count { skippedLongPacket = st.interfaces[Int(id)] == nil }
        }
        guard known, !skippedLongPacket else {
            guard try input.skip(Int64(length)) else {
                throw CaptureError(
                    .truncatedRecord, "expected a \(length)-byte block (type \(type)), the file ends first",
                    offset: blockOffset)
            }
            return nil
        }
        guard length <= Pcapng.maximumBufferedBlock else {
            throw CaptureError(
                .oversizeRecord, "expected a block length ≤ \(Pcapng.maximumBufferedBlock), found \(length)",
                offset: blockOffset)
        }
        guard let block = try input.take(Int(length)) else {
            let have = try input.fill(Int(length))
            throw CaptureError(
                .truncatedRecord, "expected a \(length)-byte block, the file ends after \(have)", offset: blockOffset)
        }
        var tail = ByteReader(block.suffix(4))
        let trailer = st.endian.u32(&tail)!
        guard trailer == length else {
            throw CaptureError(
                .badBlockLength, "expected the trailing block length to repeat \(length), found \(trailer)",
                offset: blockOffset + Int64(length) - 4)
        }
        let body = block.dropFirst(8).dropLast(4)
        switch type {
        case Pcapng.sectionHeaderType:
            var b = ByteReader(body)
            _ = b.readUInt32()
            guard let major = st.endian.u16(&b) else {
                throw CaptureError(
                    .badBlockLength, "expected a Section Header Block with a version", offset: blockOffset)
            }
            guard major == 1 else {
                throw CaptureError(
                    .unsupportedVersion, "expected pcapng major version 1, found \(major)", offset: blockOffset + 12)
            }
            st.interfaces = []
            format = .pcapng
            return nil
        case Pcapng.interfaceDescriptionType:
            let interface = try Pcapng.parseInterface(body, st.endian, offset: blockOffset)
            datalink = interface.linkType
            guard LinkType.supported.contains(interface.linkType) || st.interfaces.count >= Self.maximumInterfaces
            else {
                st.interfaces.append(nil)
                throw CaptureError(
                    .unknownDatalink,
                    "interface \(st.interfaces.count - 1) has link type \(interface.linkType), expected 201, 254 or 256; its packets are skipped",
                    offset: blockOffset, isRecoverable: true)
            }
            guard st.interfaces.count < Self.maximumInterfaces else {
                throw CaptureError(
                    .oversizeRecord, "expected at most \(Self.maximumInterfaces) interfaces in a section",
                    offset: blockOffset)
            }
            st.interfaces.append(interface)
            return nil
        case Pcapng.enhancedPacketType, Pcapng.obsoletePacketType:
            var b = ByteReader(body)
            let obsolete = type == Pcapng.obsoletePacketType
            // (Packet Block: a 2-byte interface id, then a 2-byte drops count.)
            let interfaceID =
                obsolete
                ? st.endian.u16(&b).flatMap { id in st.endian.u16(&b).map { _ in UInt32(id) } } : st.endian.u32(&b)
            guard let id = interfaceID, let high = st.endian.u32(&b), let low = st.endian.u32(&b),
                let captured = st.endian.u32(&b), let original = st.endian.u32(&b),
                let data = b.readBytes(Int(captured))
            else {
                throw CaptureError(
                    .badBlockLength,
                    "expected \(obsolete ? "a Packet Block" : "an Enhanced Packet Block") whose captured length fits its block length \(length)",
                    offset: blockOffset, isRecoverable: true)
            }
            guard Int(id) < st.interfaces.count else {
                throw CaptureError(
                    .unknownInterface,
                    st.interfaces.isEmpty
                        ? "expected an Interface Description Block before the first packet, found a packet of interface \(id)"
                        : "expected an interface id < \(st.interfaces.count), found \(id)",
                    offset: blockOffset + 8, isRecoverable: true)
            }
            guard let interface = st.interfaces[Int(id)] else { return nil }
            let ticks = UInt64(high) << 32 | UInt64(low)
            guard let timestamp = interface.timestamp(ticks: ticks) else {
                throw CaptureError(
                    .badTimestamp,
                    "expected a packet timestamp between 1677-09-21 and 2262-04-11, found \(ticks) ticks of \(interface.resolutionText) with an offset of \(interface.offsetSeconds) s; the packet is skipped",
                    offset: blockOffset + 12, isRecoverable: true)
            }
            return try LinkType.decode(
                linkType: interface.linkType, data: data, originalLength: Int(original),
                timestamp: timestamp, interface: UInt16(truncatingIfNeeded: id),
                fileOffset: blockOffset)
        default:  // Simple Packet Block: interface 0, no timestamp.
            var b = ByteReader(body)
            guard let original = st.endian.u32(&b) else {
                throw CaptureError(
                    .badBlockLength, "expected a Simple Packet Block with an original length", offset: blockOffset,
                    isRecoverable: true)
            }
            guard !st.interfaces.isEmpty else {
                throw CaptureError(
                    .unknownInterface, "expected an Interface Description Block before a Simple Packet Block",
                    offset: blockOffset, isRecoverable: true)
            }
            guard let interface = st.interfaces[0] else { return nil }
            var count = min(Int(original), b.remaining)
            if interface.snapLength > 0 { count = min(count, Int(interface.snapLength)) }
            let data = b.readBytes(count)!
            return try LinkType.decode(
                linkType: interface.linkType, data: data, originalLength: Int(original),
                timestamp: .zero, interface: 0, fileOffset: blockOffset)
        }
    }
}

/// What a reader's short path found: a record read or taken, more bytes needed, or a case for the checked path.
enum ShortPath { case done, taken, need(Int), checked }

extension CaptureReader where Source == FileByteSource {
    /// Opens the capture at `path`.
    public init(path: String, format: CaptureFormat = .auto) throws(CaptureError) {
        self.init(source: try FileByteSource(path: path), format: format)
    }

    /// ``next()``, compiled for files inside this module (so callers elsewhere get the specialised code).
    public mutating func nextFromFile() throws(CaptureError) -> HCIRecord? { try next() }

    /// ``next(into:)``, compiled for files inside this module.
    public mutating func nextFromFile(into record: inout HCIRecord) throws(CaptureError) -> Bool {
        try next(into: &record)
    }
}
