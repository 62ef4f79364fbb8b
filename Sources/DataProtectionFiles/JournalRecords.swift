import DataProtectionFormat
import SystemLayer
import ProtectionCrypto

/// The valid records of a journal (FORMAT.md §6.7.2): from a start offset, each record whose fields are in range and
/// whose checksum chains to the header's, up to the first that is torn, stale or missing.
///
/// The journal is read in windows of 1 MiB (a record larger than that on its own), not three reads per record: a log
/// (§6.7.6) holds hundreds of small records, which recovery and a writer continuing the log both read through.
struct JournalRecords {
    /// One valid record: its head, where its payload sits in the journal, and a mark's fields.
    struct Record {
        var head: JournalFormat.RecordHead
        var payloadAt: Int64
        /// A commit mark's payload (`.mark` records; nil for a mark whose payload is no mark a writer writes).
        var mark: JournalFormat.Mark?
    }

    static let window = 1 << 20

    /// The valid records from `start` on, and the offset just past the last of them.
    static func read(_ io: any FileIO, _ fd: Int32, chain: [UInt8], from start: Int64) throws(SystemError) -> (records: [Record], end: Int64) {
        let size = try io.size(fd)
        var buffer: [UInt8] = [], bufferAt = start
        /// The `count` bytes at `at`, or nil past the end of the journal.
        func bytes(_ at: Int64, _ count: Int) throws(SystemError) -> ArraySlice<UInt8>? {
            guard at + Int64(count) <= size else { return nil }
            if at < bufferAt || at + Int64(count) > bufferAt + Int64(buffer.count) {
                buffer = try io.readBytes(fd, count: Int(min(Int64(max(count, window)), size - at)), at: at)
                bufferAt = at
                guard buffer.count >= count else { return nil }
            }
            let from = Int(at - bufferAt)
            return buffer[from..<(from + count)]
        }
        var out: [Record] = []
        var at = start
        while let head = try bytes(at, JournalFormat.recordHeadSize), let h = JournalFormat.parseHead(Array(head)) {
            let payloadAt = at + Int64(head.count)
            guard let rest = try bytes(payloadAt, h.length + JournalFormat.checksumSize) else { break }
            let payload = rest.prefix(h.length)
            let want = try? payload.withUnsafeBytes { (p) throws(CryptoError) in
                try JournalFormat.recordChecksum(chain: chain, head: Array(head), payload: p)
            }
            guard let want, want.elementsEqual(rest.suffix(JournalFormat.checksumSize)) else { break }
            out.append(Record(head: h, payloadAt: payloadAt, mark: h.type == .mark ? JournalFormat.Mark.parse(Array(payload)) : nil))
            at = payloadAt + Int64(rest.count)
        }
        return (out, at)
    }
}
