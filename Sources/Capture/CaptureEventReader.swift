// SPDX-License-Identifier: GPL-2.0-or-later

/// Streams ``CaptureEvent``s straight from a capture: a ``CaptureReader`` feeding an ``ATTExtractor``.
///
/// Recoverable reader errors (a malformed packet in a well-framed record, an unsupported pcapng
/// interface) become ``CaptureEvent/warning(_:)`` events and reading goes on; fatal ones (bad magic,
/// truncation, oversize records) are thrown after every event before them has been returned.
public struct CaptureEventReader<Source: ByteSource>: Sendable {
    public private(set) var records: CaptureReader<Source>
    public private(set) var extractor: ATTExtractor
    private var pending: [CaptureEvent] = []
    private var index = 0

    public init(records: CaptureReader<Source>, extractor: ATTExtractor = ATTExtractor()) {
        self.records = records
        self.extractor = extractor
    }

    /// The next event, or nil at the end of the capture.
    public mutating func next() throws(CaptureError) -> CaptureEvent? {
        while index >= pending.count {
            pending.removeAll(keepingCapacity: true)
            index = 0
            do {
                guard let record = try records.next() else { return nil }
                try extractor.consume(record, into: &pending)
            } catch  where error.isRecoverable && !extractor.strict {
                pending.append(.warning(error))
            }
        }
        defer { index += 1 }
        return pending[index]
    }
}

extension CaptureEventReader where Source == FileByteSource {
    /// Opens the capture at `path`.
    public init(path: String, format: CaptureFormat = .auto, strict: Bool = false) throws(CaptureError) {
        self.init(records: try CaptureReader(path: path, format: format), extractor: ATTExtractor(strict: strict))
    }
}
