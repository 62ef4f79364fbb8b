import ProtectionCrypto

/// The byte layout of the rollback journal (FORMAT.md §6.7): pure encoding and checking, no I/O.
///
/// A journal is a sidecar file `.<name>.dpjournal` beside the protected file.
/// It holds a header, then records, each closed by a keyless BLAKE2b-256
/// checksum chained to the header's, so a torn or stale tail is recognised
/// and recovery needs no key. It holds ciphertext only: the old (or, for a
/// truncate, new) sealed bytes of chunks exactly as they are on disk.
public enum JournalFormat {
    /// The journal magic, bytes 0..<8.
    public static let magic: [UInt8] = [0x89, 0x44, 0x50, 0x4A, 0x0D, 0x0A, 0x1A, 0x0A]  // "\x89DPJ\r\n\x1a\n"
    /// The version writers write: 2 binds the journal to a hash of the data file's whole header.
    public static let version: UInt8 = 2
    /// Header bytes of the current version: 80 bytes of fields, then their 32-byte checksum.
    public static let headerSize = 112
    /// Header bytes of version 1 (bound by file identifier only): 64 bytes of fields, then their checksum.
    public static let version1HeaderSize = 96
    /// Record bytes before the payload: type, 3 zero bytes, payload length (4), file offset (8).
    public static let recordHeadSize = 16
    /// Bytes of every checksum (BLAKE2b-256).
    public static let checksumSize = 32
    /// The largest payload a record may carry: one 16 MiB chunk and its overhead.
    public static let maxPayload = (1 << 24) + 64

    /// What recovery does with a hot journal.
    public enum Kind: UInt8, Sendable {
        /// Undo records: put them back and cut the file to the committed size.
        case rollback = 1
        /// A truncate in flight: roll forward (redo records) if the file already has the target size, else back.
        case truncate = 2
        /// A log of commits made without fsyncs since the committed size was synced (a WAL's, FORMAT.md §6.7.6): undo
        /// records and commit marks; recovery keeps the file as of the last mark made in this boot, else rolls back.
        case log = 3
    }

    /// What a record holds.
    public enum RecordType: UInt8, Sendable {
        /// The bytes at `offset` as of the last commit.
        case undo = 1
        /// The bytes at `offset` once a truncate is complete.
        case redo = 2
        /// A commit (kind `.log` only): the data file's size on disk then and the boot it was made in (`Mark`);
        /// offset 0. The undo records after it hold chunks as of that commit.
        case mark = 3
    }

    /// A commit mark's payload: the data file's size on disk at the commit, and the boot ID (16 bytes) it was made in.
    public struct Mark: Equatable, Sendable {
        /// The payload's bytes: the size (8, big-endian), then the boot ID.
        public static let size = 24
        public var fileSize: Int64
        public var boot: [UInt8]

        public init(fileSize: Int64, boot: [UInt8]) {
            self.fileSize = fileSize
            self.boot = boot
        }

        public var encoded: [UInt8] { JournalFormat.bigEndian(UInt64(fileSize)) + boot }

        /// The mark in `b` (a record's payload), or nil when it is not one a writer writes.
        public static func parse(_ b: [UInt8]) -> Mark? {
            guard b.count == size else { return nil }
            let s = Int64(bitPattern: JournalFormat.readBigEndian(b, 0))
            guard s >= 0 else { return nil }
            return Mark(fileSize: s, boot: Array(b[8..<size]))
        }
    }

    /// Which data file a journal applies to.
    public enum Binding: Equatable, Sendable {
        /// Version 1 (read, never written): the data file's 16-byte identifier (FORMAT.md §3.1).
        case fileID([UInt8])
        /// Version 2: BLAKE2b-256 of the data file's whole 176-byte header, as on disk.
        case headerHash([UInt8])

        /// The binding of the current version for a data file whose header bytes are `dataHeader`.
        public static func of(_ dataHeader: [UInt8]) throws(CryptoError) -> Binding { .headerHash(try checksum(dataHeader)) }

        /// Whether a data file whose first bytes are `dataHeader` (at least 176 of them) is the one bound.
        public func matches(_ dataHeader: [UInt8]) -> Bool {
            guard dataHeader.count >= FileHeader.size else { return false }
            switch self {
            case .fileID(let id): return Array(dataHeader[24..<40]) == id
            case .headerHash(let h): return (try? checksum(Array(dataHeader[0..<FileHeader.size]))) == h
            }
        }
    }

    /// A journal's header: what recovery does, to which file, and the sizes it restores.
    public struct Header: Equatable, Sendable {
        /// What recovery does with the journal.
        public var kind: Kind
        /// The data file the journal applies to, and through it the header's version.
        public var binding: Binding
        /// The data file's size on disk as of the last commit.
        public var committedSize: Int64
        /// For `.truncate`: the size on disk once the truncate is complete; else 0.
        public var targetSize: Int64
        /// 8 random bytes, fresh for every journal: records chain to this journal's header only.
        public var generation: [UInt8]

        /// A header from its fields (nothing is checked: `parseHeader` validates).
        public init(kind: Kind, binding: Binding, committedSize: Int64, targetSize: Int64, generation: [UInt8]) {
            self.kind = kind
            self.binding = binding
            self.committedSize = committedSize
            self.targetSize = targetSize
            self.generation = generation
        }

        /// Where the first record starts: the header's size in its version.
        public var size: Int {
            if case .fileID = binding { return version1HeaderSize }
            return headerSize
        }
    }

    /// The fixed part of a record, before its payload and checksum.
    public struct RecordHead: Equatable, Sendable {
        /// Undo or redo.
        public var type: RecordType
        /// Payload bytes: one sealed chunk as on disk.
        public var length: Int
        /// Where in the data file the payload belongs.
        public var offset: Int64

        /// A record head from its fields (nothing is checked: `parseHead` validates).
        public init(type: RecordType, length: Int, offset: Int64) {
            self.type = type
            self.length = length
            self.offset = offset
        }
    }

    /// The header bytes, checksum included (version 2; version 1 for a `.fileID` binding, which only tests write).
    public static func encode(_ h: Header) throws(CryptoError) -> [UInt8] {
        var b = magic
        switch h.binding {
        case .fileID(let id):
            b += [1, h.kind.rawValue] + [UInt8](repeating: 0, count: 6) + id
        case .headerHash(let hash):
            b += [version, h.kind.rawValue] + [UInt8](repeating: 0, count: 6) + hash
        }
        b += bigEndian(UInt64(h.committedSize)) + bigEndian(UInt64(h.targetSize))
        b += h.generation
        b += [UInt8](repeating: 0, count: 8)
        b += try checksum(b)
        return b
    }

    /// The header at the start of `b` and its checksum, or nil when it is not a valid version-2 (or version-1) header.
    public static func parseHeader(_ b: [UInt8]) -> (Header, checksum: [UInt8])? {
        guard b.count >= version1HeaderSize, Array(b[0..<8]) == magic, let kind = Kind(rawValue: b[9]), b[10..<16].allSatisfy({ $0 == 0 }) else { return nil }
        let bindingSize: Int
        switch b[8] {
        case 1: bindingSize = 16
        case version: bindingSize = 32
        default: return nil
        }
        let fields = 16 + bindingSize + 32, size = fields + checksumSize  // binding, sizes, generation, reserved
        guard b.count >= size, b[(fields - 8)..<fields].allSatisfy({ $0 == 0 }) else { return nil }
        let sum = Array(b[fields..<size])
        guard let want = try? checksum(Array(b[0..<fields])), want == sum else { return nil }
        let at = 16 + bindingSize
        let committed = Int64(bitPattern: readBigEndian(b, at)), target = Int64(bitPattern: readBigEndian(b, at + 8))
        guard committed >= 0, target >= 0, kind == .truncate ? target < committed : target == 0 else { return nil }
        let bound = Array(b[16..<at])
        let header = Header(
            kind: kind, binding: bindingSize == 16 ? .fileID(bound) : .headerHash(bound), committedSize: committed, targetSize: target,
            generation: Array(b[(at + 16)..<(at + 24)]))
        return (header, sum)
    }

    /// Why record `r` of a journal with header `h` cannot be one a writer of a file laid out as `layout` wrote, or nil.
    ///
    /// A writer journals whole chunks only, each at its own offset: an undo record holds a chunk
    /// as of the last commit (a full chunk, or the last one, ending at the committed size), a
    /// redo record the new last chunk of a truncate (ending at the target size). Anything else
    /// (an offset in the header, between chunks or past the end, a length that is no chunk's)
    /// comes from a forged or buggy journal, which recovery refuses whole.
    /// - Parameter committed: the size on disk the record restores: the committed size, or in a log the size of the
    ///   last mark before it.
    public static func problem(with r: RecordHead, in h: Header, layout: ChunkLayout, committed: Int64? = nil) -> String? {
        if r.type == .mark {
            guard h.kind == .log else { return "a commit mark in a journal that is no log" }
            guard r.length == Mark.size, r.offset == 0 else { return "a commit mark of \(r.length) bytes at offset \(r.offset)" }
            return nil
        }
        let start = Int64(layout.headerSize), stride = Int64(layout.stride), length = Int64(r.length)
        guard r.offset >= start else { return "a record at offset \(r.offset), inside the header" }
        guard (r.offset - start) % stride == 0 else { return "a record at offset \(r.offset), not where a chunk starts" }
        guard length >= Int64(layout.overhead), length <= stride else { return "a record of \(r.length) bytes, not a chunk's length" }
        let end = r.type == .undo ? committed ?? h.committedSize : h.targetSize
        if r.type == .redo && h.kind != .truncate { return "a redo record in a rollback journal" }
        guard r.offset + length <= end else { return "a record ending at \(r.offset + length), past the size \(end) it restores" }
        guard length == stride || r.offset + length == end else { return "a short record at offset \(r.offset) that is not the last chunk" }
        return nil
    }

    /// Why `size`, a size on disk a journal restores, fits no file laid out as `layout`, or nil.
    public static func problem(withSize size: Int64, layout: ChunkLayout) -> String? {
        guard size <= layout.fileSize(forPlaintextSize: ChunkLayout.maxPlaintextSize), layout.plaintextSize(forFileSize: size) != nil else {
            return "a size of \(size) bytes that no protected file of its layout has"
        }
        return nil
    }

    /// Why the sizes in `h` fit no file laid out as `layout`, or nil.
    public static func problem(with h: Header, layout: ChunkLayout) -> String? {
        for size in h.kind == .truncate ? [h.committedSize, h.targetSize] : [h.committedSize] {
            if let why = problem(withSize: size, layout: layout) { return why }
        }
        return nil
    }

    /// The 16 bytes of a record head.
    public static func encodeHead(_ r: RecordHead) -> [UInt8] {
        [r.type.rawValue, 0, 0, 0] + bigEndian(UInt32(r.length)) + bigEndian(UInt64(r.offset))
    }

    /// The record head at the start of `b`, or nil when it is not one a writer writes.
    public static func parseHead(_ b: [UInt8]) -> RecordHead? {
        guard b.count >= recordHeadSize, let type = RecordType(rawValue: b[0]), b[1] == 0, b[2] == 0, b[3] == 0 else { return nil }
        let length = Int(readBigEndian(b, 4, width: 4)), offset = Int64(bitPattern: readBigEndian(b, 8))
        guard length > 0, length <= maxPayload, offset >= 0 else { return nil }
        return RecordHead(type: type, length: length, offset: offset)
    }

    /// A record's checksum: BLAKE2b-256(header checksum ‖ record head ‖ payload).
    public static func recordChecksum(chain: [UInt8], head: [UInt8], payload: UnsafeRawBufferPointer) throws(CryptoError) -> [UInt8] {
        try chain.span.bytes.withUnsafeBytes { (c) throws(CryptoError) in
            try head.span.bytes.withUnsafeBytes { (h) throws(CryptoError) in try GenericHash.hash(c, h, payload) }
        }
    }

    /// The unkeyed BLAKE2b-256 of `b`.
    public static func checksum(_ b: [UInt8]) throws(CryptoError) -> [UInt8] {
        try b.span.bytes.withUnsafeBytes { (p) throws(CryptoError) in try GenericHash.hash(p) }
    }

    /// `v` as 8 big-endian bytes.
    package static func bigEndian(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: v >> (56 - 8 * $0)) } }
    /// `v` as 4 big-endian bytes.
    package static func bigEndian(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (24 - 8 * $0)) } }
    /// The big-endian integer of `width` bytes at `at`.
    package static func readBigEndian(_ b: [UInt8], _ at: Int, width: Int = 8) -> UInt64 {
        var v: UInt64 = 0
        for i in 0..<width { v = v << 8 | UInt64(b[at + i]) }
        return v
    }
}
