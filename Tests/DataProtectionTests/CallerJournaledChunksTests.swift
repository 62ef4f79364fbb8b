import Foundation
@_spi(Testing) import DataProtection  // the testing SPI: the file-system seam, test hooks
// @testable: abandons a writer (a killed process) through the handle's internal `abandon`.
@testable import DataProtectionFiles
import XCTest

/// The chunk journal of a handle whose caller journals whole chunks itself (a database's main file, FORMAT.md §6.7.5):
/// whole, interior chunk overwrites get no record and leave the journal cold; the committed last chunk, partial chunks
/// and appends are journaled as for any file, and a handle not so marked journals everything.
final class CallerJournaledChunksTests: XCTestCase {
    let options = ProtectedFileOptions(chunkSize: 4096)

    /// A committed file of 10 full chunks and a partial last one, open for writing.
    private func openCommitted(_ files: ProtectedFiles, _ path: String) throws -> (ProtectedFileHandle, [UInt8]) {
        var rng = TestRNG(seed: 7)
        let bytes = rng.bytes(10 * 4096 + 100)
        try files.write(bytes, to: path, protection: .complete)
        return (try files.open(path, forWriting: true), bytes)
    }

    func testWholeInteriorOverwritesSkipTheJournalOnlyWhenTheCallerJournalsThem() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: options)
        let page = [UInt8](repeating: 0xAA, count: 2 * 4096)

        // Control: an ordinary handle journals a whole, interior overwrite.
        let (plain, _) = try openCommitted(files, dir + "/plain")
        try plain.write(page, at: 4096)
        XCTAssertTrue(plain.holdsHotJournal, "an ordinary handle journals every committed chunk it overwrites")
        plain.close()

        let path = dir + "/db"
        let (h, old) = try openCommitted(files, path)
        h.leaveWholeChunksToTheCallersJournal()
        try h.write(page, at: 4096)  // chunks 1 and 2, whole and interior
        XCTAssertFalse(h.holdsHotJournal, "whole interior chunks: no journal")
        XCTAssertFalse(FileManager.default.fileExists(atPath: ProtectedFiles.journalPath(for: path)), "no journal file was made")
        try h.write([1, 2, 3], at: 3 * 4096 + 10)  // part of chunk 3
        XCTAssertTrue(h.holdsHotJournal, "a partial chunk is journaled")
        try h.sync()
        try h.write([UInt8](repeating: 0xBB, count: 100), at: 10 * 4096)  // the committed last chunk, whole
        XCTAssertTrue(h.holdsHotJournal, "the committed last chunk is journaled")
        try h.sync()
        try h.write([UInt8](repeating: 0xCC, count: 4096), at: 10 * 4096 + 100)  // an append: re-seals the old last chunk
        XCTAssertTrue(h.holdsHotJournal, "an append is journaled")

        // A crash now: recovery rolls back what the journal holds (the append, the old last chunk); the whole interior
        // chunks keep what was written (the caller's own journal restores them), and the file authenticates throughout.
        h.abandon()
        _ = try files.recover(path)
        var expected = old
        expected.replaceSubrange(4096..<(3 * 4096), with: page)
        expected.replaceSubrange((3 * 4096 + 10)..<(3 * 4096 + 13), with: [1, 2, 3])
        expected.replaceSubrange((10 * 4096)..<(10 * 4096 + 100), with: [UInt8](repeating: 0xBB, count: 100))
        XCTAssertEqual(try files.read(path), expected)
    }
}
