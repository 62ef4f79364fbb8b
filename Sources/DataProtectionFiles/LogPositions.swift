import DataProtectionFormat
import Locking

/// Where the handles of this process last marked each file's log (FORMAT.md §6.7.6), so that the next writer of the
/// file in this process, whichever handle it is, continues the log from there instead of reading it from its header.
///
/// Why it is shared: a database's connections are separate handles that take turns at its WAL, each commit continuing
/// the log the last one marked. A writer that reads the log through from the header reads and checksums up to the log's
/// limit (1 MiB) under SQLite's write lock, at every commit; with four connections in one process that was most of a
/// protected WAL commit's time (`continueLog`).
///
/// A position is trusted only for the log it was taken in: the header checksum it holds covers the log's random
/// generation and the data file's header, so a log emptied and begun again, or the journal of a file replaced at the
/// same path, does not match it, and the writer reads from the header. Records that another process wrote after it are
/// read and checked as any (`JournalRecords`). Entries are removed when a handle of this process empties the log.
enum LogPositions {
    struct Position {
        /// Where the next record goes: just past the mark.
        var end: Int64
        /// The log's header checksum, which its records chain to.
        var chain: [UInt8]
        var mark: JournalFormat.Mark
        /// The journal's length as the marking handle knew it (`WriteJournal.written`). The next writer takes it rather
        /// than the file's length: a journal is never cut while it holds a log, so the file is at least this long, and
        /// zeros that another process wrote ahead past it are written again at worst.
        var written: Int64
        /// The journal that made the mark (`WriteJournal.owner`): when the log still ends in it, that journal's handle
        /// knows the file as it is.
        var owner: UInt64
    }

    private static let table = Locked<[String: Position]>([:])

    /// Where a handle of this process marked the log of the file at `dataPath` last, if it is the log that `chain`
    /// heads.
    static func position(of dataPath: String, chain: [UInt8]) -> Position? {
        position(of: dataPath).flatMap { $0.chain == chain ? $0 : nil }
    }

    /// The last mark a handle of this process made in a log of the file at `dataPath`, whichever log it was.
    static func position(of dataPath: String) -> Position? {
        table.withLock { $0[dataPath] }
    }

    /// Records a mark, made holding the log's lock.
    static func marked(_ dataPath: String, _ position: Position) {
        table.withLock { $0[dataPath] = position }
    }

    /// Forgets the log of the file at `dataPath` (emptied, or begun again).
    static func forget(_ dataPath: String) {
        _ = table.withLock { $0.removeValue(forKey: dataPath) }
    }
}
