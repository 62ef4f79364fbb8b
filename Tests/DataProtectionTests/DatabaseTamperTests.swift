import CSQLite
import DataProtection
import DataProtectionFormat
import DataProtectionSQLite
import Foundation
import XCTest

/// Tampering with a protected database's main file, its hot rollback journal or its WAL (issue 21, Show: Tamper):
/// flipped bytes, truncation at and inside chunk boundaries, chunks swapped or copied from another position, and
/// chunks spliced from another database under the same keys. Every mutant ends in the committed rows exactly (integrity
/// ok) or in `DatabaseError.isTampered` with the raw result code `DatabaseError.tampered`; never in other rows.
///
/// `TamperTests` covers the file layer byte by byte; this suite checks that SQLite, reading through the VFS, turns each
/// detection into that error (a journal SQLite plays back and a WAL it recovers are read at offsets of its own choosing).
final class DatabaseTamperTests: XCTestCase {
    private struct Outcome { var tried = 0, detected = 0, intact = 0, unusedIntact = 0 }
    private let keys = try! InMemoryClassKeys.random()
    private lazy var files = ProtectedFiles(keys: keys, options: .init(chunkSize: ProtectedVFS.pageSize))
    private var stride: Int { ProtectedVFS.pageSize + ChunkCipher.forNewFiles(files.options.cipher).overhead }

    /// A crashed unit: runs `statements` on a new database `live` and copies its main file and `suffix` companion to
    /// `path` while the connection holds them; returns the copied files' bytes.
    private func unit(_ live: String, _ path: String, suffix: String, _ statements: [String]) throws -> [String: [UInt8]] {
        let db = try ProtectedDatabase.open(path: live, protection: .completeUntilFirstUserAuthentication, files: files)
        defer { db.close() }
        for s in statements { try db.execute(s) }
        var out: [String: [UInt8]] = [:]
        for s in Set(["", suffix]) { out[path + s] = try readBytes(live + s) }
        return out
    }

    /// The database's page count (`PRAGMA page_count`: the pages SQLite uses, from its header).
    private func pageCount(_ path: String) throws -> Int {
        let db = try ProtectedDatabase.open(path: path, protection: .none, files: files)
        defer { db.close() }
        guard case .integer(let n)? = try db.rows("PRAGMA page_count").first?.first else { throw XCTSkip("no page count") }
        return Int(n)
    }

    /// What reading the unit at `path` gives: the rows' (count, total) with integrity ok, or the error.
    private func read(_ path: String) -> Result<[[DatabaseValue]], DatabaseError> {
        do throws(DatabaseError) {
            let db = try ProtectedDatabase.open(path: path, protection: .none, files: files)
            defer { db.close() }
            let check = try db.rows("PRAGMA integrity_check")
            return .success(check + (try db.rows("SELECT count(*), total(x) FROM t")))
        } catch { return .failure(error) }
    }

    /// Writes `unit` with `target` replaced by `mutant`, reads it and checks the outcome.
    ///
    /// - Parameter unused: the mutant changes only chunks past the database's last page: the sealed zeros a database
    ///   grows by in steps (FORMAT.md §6.7.5), which hold no page SQLite uses. SQLite never reads them (it writes a
    ///   page it adds there without reading it first), so such a mutant may read intact; it must still never give
    ///   other rows.
    private func check(
        _ unit: [String: [UInt8]], _ target: String, _ mutant: [UInt8], expected: [[DatabaseValue]], _ what: String, unused: Bool = false,
        _ out: inout Outcome
    ) throws {
        for f in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: unit.keys.min()! + f) }
        for (p, b) in unit { try writeBytes(p == target ? mutant : b, p) }
        out.tried += 1
        switch read(unit.keys.min()!) {
        case .success(let rows):
            XCTAssertEqual(rows, expected, "mutant '\(what)' returned other rows")
            if unused { out.unusedIntact += 1 } else { out.intact += 1 }
        case .failure(let e):
            XCTAssertTrue(e.isTampered, "mutant '\(what)': not a tampered error: \(e.resultCode) \(e.message)")
            XCTAssertEqual(e.resultCode, DatabaseError.tampered, "mutant '\(what)': raw result code \(e.resultCode): \(e.message)")
            XCTAssertTrue(e.message.contains("restore"), "mutant '\(what)': \(e.message)")
            out.detected += 1
        }
    }

    /// Mutants of file `name` of `unit` (chunk-level: flips, truncations, swaps, copies, splices from `other`).
    ///
    /// - Parameter used: the chunks holding content; the ones from `used` on are a database's unused end (`check`).
    private func mutate(
        _ unit: [String: [UInt8]], _ name: String, other: [UInt8], expected: [[DatabaseValue]], used: Int = .max, _ out: inout Outcome
    ) throws {
        let f = unit[name]!, s = stride
        let chunks = (f.count - FileHeader.size + s - 1) / s
        XCTAssertGreaterThan(chunks, 3, name)
        func chunk(_ b: [UInt8], _ i: Int) -> ArraySlice<UInt8> { b[(FileHeader.size + i * s)..<min(b.count, FileHeader.size + (i + 1) * s)] }
        func assemble(_ parts: [ArraySlice<UInt8>]) -> [UInt8] { Array(f[0..<FileHeader.size]) + parts.flatMap { $0 } }
        let all = (0..<chunks).map { chunk(f, $0) }
        var flipped = f
        flipped[100] ^= 0x10
        try check(unit, name, flipped, expected: expected, "\(name): header byte 100 flipped", &out)
        for i in 0..<chunks {
            var x = f
            x[FileHeader.size + i * s + min(s, f.count - FileHeader.size - i * s) / 2] ^= 0x01
            try check(unit, name, x, expected: expected, "\(name): chunk \(i) byte flipped", unused: i >= used, &out)
            if i > 0 {
                try check(unit, name, Array(f[0..<(FileHeader.size + i * s)]), expected: expected, "\(name): truncated before chunk \(i)", unused: i >= used, &out)
                try check(
                    unit, name, Array(f[0..<(FileHeader.size + i * s - 100)]), expected: expected, "\(name): truncated inside chunk \(i - 1)",
                    unused: i - 1 >= used, &out)
            }
            if i + 1 < chunks {
                var swapped = all
                swapped.swapAt(i, i + 1)
                try check(unit, name, assemble(swapped), expected: expected, "\(name): chunks \(i), \(i + 1) swapped", unused: i >= used, &out)
                var copied = all
                copied[i + 1] = all[i]
                try check(unit, name, assemble(copied), expected: expected, "\(name): chunk \(i) copied over chunk \(i + 1)", unused: i + 1 >= used, &out)
            }
            if other.count >= FileHeader.size + (i + 1) * s {
                var spliced = all
                spliced[i] = chunk(other, i)
                try check(unit, name, assemble(spliced), expected: expected, "\(name): chunk \(i) from another database", unused: i >= used, &out)
            }
        }
        try check(unit, name, f, expected: expected, "\(name): unmodified", &out)
    }

    func testTamperedDatabaseJournalOrWALGivesTheTamperedErrorNeverOtherRows() throws {
        let dir = try temporaryDirectory(self)
        let rows = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400) INSERT INTO t SELECT i, randomblob(100) FROM n"
        let expected: [[DatabaseValue]] = [[.text("ok")], [.integer(400), .real(80_200)]]
        var totals: [String: Outcome] = [:]

        // The main file of a database at rest, with a spliced-from database of the same size under the same keys.
        let main = try unit(dir + "/a.db", dir + "/m.db", suffix: "", ["CREATE TABLE t(x, pad)", rows])
        let otherMain = try unit(dir + "/b.db", dir + "/n.db", suffix: "", ["CREATE TABLE t(x, pad)", rows])
        let pages = try pageCount(dir + "/a.db")
        XCTAssertGreaterThan((main[dir + "/m.db"]!.count - FileHeader.size) / stride, pages, "the database grew in a step past its last page")
        var o = Outcome()
        try mutate(main, dir + "/m.db", other: otherMain[dir + "/n.db"]!, expected: expected, used: pages, &o)
        totals["database"] = o

        // A hot journal: the copy is mid-transaction (pages spilled into the main file), so the journal is played back
        // (the unmodified control reads the 400 committed rows, not the 800 of the open transaction).
        let hot = ["PRAGMA journal_mode = PERSIST; PRAGMA cache_size = 2; CREATE TABLE t(x, pad)", rows,
                   "BEGIN; UPDATE t SET x = x + 1000000; INSERT INTO t SELECT x, pad FROM t"]
        let journal = try unit(dir + "/c.db", dir + "/j.db", suffix: "-journal", hot)
        let otherJournal = try unit(dir + "/d.db", dir + "/k.db", suffix: "-journal", hot)
        o = Outcome()
        try mutate(journal, dir + "/j.db-journal", other: otherJournal[dir + "/k.db-journal"]!, expected: expected, &o)
        totals["journal"] = o

        // A WAL holding committed frames not yet checkpointed.
        let wal = ["PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; CREATE TABLE t(x, pad)", rows]
        let w = try unit(dir + "/e.db", dir + "/w.db", suffix: "-wal", wal)
        let otherWAL = try unit(dir + "/f.db", dir + "/v.db", suffix: "-wal", wal)
        o = Outcome()
        try mutate(w, dir + "/w.db-wal", other: otherWAL[dir + "/v.db-wal"]!, expected: expected, &o)
        totals["wal"] = o

        for (name, t) in totals.sorted(by: { $0.key < $1.key }) {
            XCTAssertEqual(t.intact, 1, "\(name): only the unmodified control may read intact")
            print("database tamper (\(name)): \(t.tried) mutants, \(t.detected) gave DatabaseError.tampered (\(DatabaseError.tampered)), \(t.intact) unmodified control read all 400 rows, \(t.unusedIntact) of the unused end past the last page read all 400 rows, 0 returned other rows")
        }
    }
}
