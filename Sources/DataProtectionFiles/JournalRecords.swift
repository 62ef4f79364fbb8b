import DataProtectionFormat
import SystemLayer
import ProtectionCrypto

/// The valid records of a journal (FORMAT.md §6.7.2): from a start offset, each record whose fields are in range and
/// whose checksum chains to the header's, up to the first that is torn, stale or missing.
///
/// The journal is read in windows that double from 1 KiB to 1 MiB (a record larger than that on its own), not three
/// reads per record: a log (§6.7.6) holds hundreds of small records, which recovery reads through, while a writer
/// continuing a log from its last mark (`LogPositions`) reads only what follows it, usually nothing but the zeros that
/// `WriteJournal.zeroFill` wrote ahead (up to 1 MiB, which a fixed 1 MiB window read whole at every commit).
struct JournalRecords {
    /// One valid record: its head, where its payload sits in the journal, and a mark's fields.
    struct Record {
        var head: JournalFormat.RecordHead
        var payloadAt: Int64
        /// A commit mark's payload (`.mark` records; nil for a mark whose payload is no mark a writer writes).
        var mark: JournalFormat.Mark?
    }

    static let firstWindow = 1 << 10, lastWindow = 1 << 20

    /// A `size` for `read` that reads up to the end of the file, where a read comes back short, without asking its length.
    static let toTheEnd = Int64.max / 2

    /// The valid records from `start` on, and the offset just past the last of them.
    /// - Parameter known: the journal's size, when the caller has it.
    static func read(_ io: any FileIO, _ fd: Int32, chain: [UInt8], from start: Int64, size known: Int64? = nil) throws(SystemError) -> (records: [Record], end: Int64) {
        let size: Int64
        if let known { size = known } else { size = try io.size(fd) }
        var buffer: [UInt8] = [], bufferAt = start, window = firstWindow
        /// The `count` bytes at `at`, or nil past the end of the journal.
        func bytes(_ at: Int64, _ count: Int) throws(SystemError) -> ArraySlice<UInt8>? {
            guard at + Int64(count) <= size else { return nil }
            if at < bufferAt || at + Int64(count) > bufferAt + Int64(buffer.count) {
                buffer = try io.readBytes(fd, count: Int(min(Int64(max(count, window)), size - at)), at: at)
                bufferAt = at
                window = min(window * 2, lastWindow)
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
