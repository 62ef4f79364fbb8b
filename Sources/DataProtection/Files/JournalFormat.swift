import ProtectionCrypto

/// The byte layout of the rollback journal (FORMAT.md §6.7): pure encoding and checking, no I/O.
///
/// A journal is a sidecar file `.<name>.dpjournal` beside the protected file.
/// It holds a header, then records, each closed by a keyless BLAKE2b-256
/// checksum chained to the header's, so a torn or stale tail is recognised
/// and recovery needs no key. It holds ciphertext only: the old (or, for a
/// truncate, new) sealed bytes of chunks exactly as they are on disk.
enum JournalFormat {
    static let magic: [UInt8] = [0x89, 0x44, 0x50, 0x4A, 0x0D, 0x0A, 0x1A, 0x0A]  // "\x89DPJ\r\n\x1a\n"
    static let version: UInt8 = 1
    /// Header bytes: 64 bytes of fields, then their 32-byte checksum.
    static let headerSize = 96
    /// Record bytes before the payload: type, 3 zero bytes, payload length (4), file offset (8).
    static let recordHeadSize = 16
    static let checksumSize = 32
    /// The largest payload a record may carry: one 16 MiB chunk and its overhead.
    static let maxPayload = (1 << 24) + 64

    /// What recovery does with a hot journal.
    enum Kind: UInt8, Sendable {
        /// Undo records: put them back and cut the file to the committed size.
        case rollback = 1
        /// A truncate in flight: roll forward (redo records) if the file already has the target size, else back.
        case truncate = 2
    }

    enum RecordType: UInt8, Sendable {
        /// The bytes at `offset` as of the last commit.
        case undo = 1
        /// The bytes at `offset` once a truncate is complete.
        case redo = 2
    }

    struct Header: Equatable, Sendable {
        var kind: Kind
        /// The data file's 16-byte identifier (FORMAT.md §3.1): a journal applies to that file only.
        var fileID: [UInt8]
        /// The data file's size on disk as of the last commit.
        var committedSize: Int64
        /// For `.truncate`: the size on disk once the truncate is complete; else 0.
        var targetSize: Int64
        /// 8 random bytes, fresh for every journal: records chain to this journal's header only.
        var generation: [UInt8]
    }

    struct RecordHead: Equatable, Sendable {
        var type: RecordType
        var length: Int
        var offset: Int64
    }

    /// The 96 header bytes, checksum included.
    static func encode(_ h: Header) throws(CryptoError) -> [UInt8] {
        var b = magic
        b.append(version)
        b.append(h.kind.rawValue)
        b += [UInt8](repeating: 0, count: 6)
        b += h.fileID
        b += bigEndian(UInt64(h.committedSize)) + bigEndian(UInt64(h.targetSize))
        b += h.generation
        b += [UInt8](repeating: 0, count: 8)
        b += try checksum(b)
        return b
    }

    /// The header in `b` (at least 96 bytes) and its checksum, or nil when it is not a valid version-1 header.
    static func parseHeader(_ b: [UInt8]) -> (Header, checksum: [UInt8])? {
        guard b.count >= headerSize, Array(b[0..<8]) == magic, b[8] == version, let kind = Kind(rawValue: b[9]),
            b[10..<16].allSatisfy({ $0 == 0 }), b[56..<64].allSatisfy({ $0 == 0 })
        else { return nil }
        let sum = Array(b[64..<96])
        guard let want = try? checksum(Array(b[0..<64])), want == sum else { return nil }
        let committed = Int64(bitPattern: readBigEndian(b, 32)), target = Int64(bitPattern: readBigEndian(b, 40))
        guard committed >= 0, target >= 0, kind == .truncate ? target < committed : target == 0 else { return nil }
        return (Header(kind: kind, fileID: Array(b[16..<32]), committedSize: committed, targetSize: target, generation: Array(b[48..<56])), sum)
    }

    static func encodeHead(_ r: RecordHead) -> [UInt8] {
        [r.type.rawValue, 0, 0, 0] + bigEndian(UInt32(r.length)) + bigEndian(UInt64(r.offset))
    }

    static func parseHead(_ b: [UInt8]) -> RecordHead? {
        guard b.count >= recordHeadSize, let type = RecordType(rawValue: b[0]), b[1] == 0, b[2] == 0, b[3] == 0 else { return nil }
        let length = Int(readBigEndian(b, 4, width: 4)), offset = Int64(bitPattern: readBigEndian(b, 8))
        guard length > 0, length <= maxPayload, offset >= 0 else { return nil }
        return RecordHead(type: type, length: length, offset: offset)
    }

    /// A record's checksum: BLAKE2b-256(header checksum ‖ record head ‖ payload).
    static func recordChecksum(chain: [UInt8], head: [UInt8], payload: UnsafeRawBufferPointer) throws(CryptoError) -> [UInt8] {
        try chain.span.bytes.withUnsafeBytes { (c) throws(CryptoError) in
            try head.span.bytes.withUnsafeBytes { (h) throws(CryptoError) in try GenericHash.hash(c, h, payload) }
        }
    }

    static func checksum(_ b: [UInt8]) throws(CryptoError) -> [UInt8] {
        try b.span.bytes.withUnsafeBytes { (p) throws(CryptoError) in try GenericHash.hash(p) }
    }

    static func bigEndian(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: v >> (56 - 8 * $0)) } }
    static func bigEndian(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (24 - 8 * $0)) } }
    static func readBigEndian(_ b: [UInt8], _ at: Int, width: Int = 8) -> UInt64 {
        var v: UInt64 = 0
        for i in 0..<width { v = v << 8 | UInt64(b[at + i]) }
        return v
    }
}

/// The path of the rollback journal of the protected file at `path`: `.<name>.dpjournal` in the same directory.
func journalPath(for path: String) -> String {
    let u = path.utf8
    guard let slash = u.lastIndex(of: UInt8(ascii: "/")) else { return ".\(path).dpjournal" }
    return "\(String(decoding: u[..<slash], as: UTF8.self))/.\(String(decoding: u[u.index(after: slash)...], as: UTF8.self)).dpjournal"
}

extension FileIO {
    /// Up to `count` bytes at `offset` (fewer only at end of file).
    func readBytes(_ fd: Int32, count: Int, at offset: Int64) throws(SystemError) -> [UInt8] {
        var failure: SystemError?
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { b, n in
            do throws(SystemError) { n = try readFully(fd, into: UnsafeMutableRawBufferPointer(b), at: offset) } catch {
                failure = error
                n = 0
            }
        }
        if let failure { throw failure }
        return bytes
    }
}
