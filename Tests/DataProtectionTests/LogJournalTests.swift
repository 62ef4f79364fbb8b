import DataProtectionFormat
import SystemLayer
import Foundation
@_spi(Testing) import DataProtection  // the testing SPI: the file-system seam, test hooks
// @testable: kills writers without a commit (`abandon`), as the crash harness does, to leave a log for recovery.
@testable import DataProtectionFiles
import ProtectionCrypto
import XCTest

/// A log (FORMAT.md §6.7.6): commits marked without fsyncs between two syncs of the file, as a WAL makes them.
/// Recovery keeps the file as of the last mark when the mark was made in this boot (a process died: the page cache
/// holds every write), and takes it back to the last sync after a reboot (`BootIdentity.simulateReboot`, the power-loss
/// model's reboot). Real files and the real keyring-free key store; nothing is mocked but the boot ID's change.
final class LogJournalTests: XCTestCase {
    let options = ProtectedFileOptions(chunkSize: 4096)

    /// A synced file of 3 chunks and a bit, a writable log handle on it, and the files.
    func loggedFile() throws -> (ProtectedFiles, String, [UInt8], ProtectedFileHandle) {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: options)
        let path = "\(dir)/wal"
        var rng = TestRNG(seed: 7)
        let synced = rng.bytes(3 * 4096 + 500)
        try files.write(synced, to: path, protection: .complete)
        let h = try files.open(path, forWriting: true)
        h.logCommits()
        return (files, path, synced, h)
    }

    /// Appends `count` bytes of `value` (a frame straddling chunks: the synced last chunk is re-sealed).
    func append(_ h: ProtectedFileHandle, _ value: UInt8, _ count: Int, to state: inout [UInt8]) throws {
        try h.append([UInt8](repeating: value, count: count))
        state += [UInt8](repeating: value, count: count)
    }

    func testAKilledWriterKeepsEveryMarkedCommitAndNothingAfter() throws {
        let (files, path, synced, h) = try loggedFile()
        var state = synced
        try append(h, 0xA1, 4120, to: &state)
        try h.markCommit()
        try append(h, 0xA2, 4120, to: &state)
        try h.write([UInt8](repeating: 0xA3, count: 100), at: Int64(synced.count + 10))  // a commit rewriting its own frame
        for i in 0..<100 { state[synced.count + 10 + i] = 0xA3 }
        try h.markCommit()
        let marked = state
        try h.write([UInt8](repeating: 0xEE, count: 300), at: Int64(synced.count + 4000))  // re-seals marked chunks
        try h.append([UInt8](repeating: 0xEF, count: 9000))
        h.abandon()  // killed before its mark
        guard case .rolledBack = try files.recover(path) else { return XCTFail("the log was not applied") }
        XCTAssertEqual(try files.read(path), marked, "the file as of the last mark")
        XCTAssertFalse(FileManager.default.fileExists(atPath: ProtectedFiles.journalPath(for: path)))
    }

    func testAfterARebootTheLogGoesBackToTheLastSync() throws {
        let (files, path, synced, h) = try loggedFile()
        var state = synced
        try append(h, 0xB1, 4120, to: &state)
        try h.markCommit()
        try append(h, 0xB2, 6000, to: &state)
        try h.markCommit()
        h.abandon()
        BootIdentity.simulateReboot()  // the page cache is gone: the marks of the old boot count for nothing
        guard case .rolledBack = try files.recover(path) else { return XCTFail("the log was not applied") }
        XCTAssertEqual(try files.read(path), synced, "the file as of its last sync")
    }

    /// The next writer, another handle, continues the log after the last mark (no fsync); a sync by any handle of the
    /// file makes the marks durable and empties the log, after which recovery has nothing to do, even after a reboot.
    func testTheNextWriterContinuesTheLogAndASyncEmptiesIt() throws {
        let (files, path, synced, h1) = try loggedFile()
        var state = synced
        try append(h1, 0xC1, 4120, to: &state)
        try h1.markCommit()
        let h2 = try files.open(path, forWriting: true)  // its open recovers the marked log: nothing to roll back
        h2.logCommits()
        try append(h1, 0xC2, 4120, to: &state)
        try h1.markCommit()
        try h2.reloadAfterOtherWriters()
        try append(h2, 0xC3, 4120, to: &state)
        try h2.markCommit()
        try h1.reloadAfterOtherWriters()
        try append(h1, 0xC4, 100, to: &state)
        try h1.markCommit()
        try h2.sync()  // not hot: empties the log that h1 left
        h1.abandon()
        h2.abandon()
        BootIdentity.simulateReboot()
        XCTAssertEqual(try files.recover(path), .discarded, "an emptied log holds nothing to recover")
        XCTAssertEqual(try files.read(path), state)
    }

    /// A writer continues the log from where a handle of this process marked it last (`LogPositions`), not from its
    /// header, and reads on through the records a writer in another process appended after that mark; a position taken
    /// in an earlier log of the file (emptied by a sync elsewhere, then begun again) is not used. The other process is
    /// played by setting this process's record back, as if the later commit had been made elsewhere: a writer that
    /// trusted the record without reading on, or trusted it in another log, would find a mark of another size there
    /// and refuse to continue.
    func testAWriterContinuesFromTheLastMarkOfThisProcessAndReadsOnThroughLaterRecords() throws {
        let (files, path, synced, h1) = try loggedFile()
        var state = synced
        try append(h1, 0xF1, 4120, to: &state)
        try h1.markCommit()
        let first = try XCTUnwrap(LogPositions.position(of: path))
        let h2 = try files.open(path, forWriting: true)
        h2.logCommits()
        try h2.reloadAfterOtherWriters()
        try append(h2, 0xF2, 4120, to: &state)
        try h2.markCommit()
        let second = try XCTUnwrap(LogPositions.position(of: path))
        XCTAssertGreaterThan(second.end, first.end)
        LogPositions.marked(path, first)  // h2's commit, as if made by another process
        try h1.reloadAfterOtherWriters()
        try append(h1, 0xF3, 4120, to: &state)
        try h1.markCommit()
        XCTAssertGreaterThan(try XCTUnwrap(LogPositions.position(of: path)).end, second.end, "appended after h2's mark")

        try h2.sync()  // empties the log
        try h1.reloadAfterOtherWriters()
        try append(h1, 0xF4, 4120, to: &state)  // begins a new log
        try h1.markCommit()
        LogPositions.marked(path, second)  // a position in the emptied log, as if this process had not seen the sync
        try commitThenDie(h2, after: 0xF5, others: [h1], files, path, state: &state)
    }

    /// Commits a frame of `value` through `writer` (continuing the log), appends more and kills it before its mark,
    /// kills `others`, then checks that recovery leaves the file as of that commit.
    func commitThenDie(
        _ writer: ProtectedFileHandle, after value: UInt8, others: [ProtectedFileHandle], _ files: ProtectedFiles, _ path: String,
        state: inout [UInt8], file: StaticString = #filePath, line: UInt = #line
    ) throws {
        try writer.reloadAfterOtherWriters()
        try append(writer, value, 4120, to: &state)
        try writer.markCommit()
        try writer.append([UInt8](repeating: 0xEF, count: 5000))
        writer.abandon()  // killed before its mark
        for h in others { h.abandon() }
        guard case .rolledBack = try files.recover(path) else { return XCTFail("the log was not applied", file: file, line: line) }
        XCTAssertEqual(try files.read(path), state, "the file as of the last mark", file: file, line: line)
    }

    /// A writer that continues after a mark of this process reads the records that follow it up to the end of the
    /// journal, not up to the journal's length that the mark recorded (`LogPositions.Position.written`): the writers of
    /// another process may have written the log past that length. The other process is played by setting the recorded
    /// length back to the mark's own end, so that every record of h2's commits lies past it: a writer that read only that
    /// far would find h1's mark last, of another size than the file's, and refuse to continue.
    func testAWriterReadsOnPastTheJournalLengthItsProcessRecorded() throws {
        let (files, path, synced, h1) = try loggedFile()
        var state = synced
        try append(h1, 0xE1, 4120, to: &state)
        try h1.markCommit()
        var recorded = try XCTUnwrap(LogPositions.position(of: path))
        let h2 = try files.open(path, forWriting: true)
        h2.logCommits()
        for value in UInt8(0xE2)...0xE5 {
            try h2.reloadAfterOtherWriters()
            try append(h2, value, 4120, to: &state)
            try h2.markCommit()
        }
        recorded.written = recorded.end
        LogPositions.marked(path, recorded)  // h2's commits, as if made by another process
        try commitThenDie(h1, after: 0xE6, others: [h2], files, path, state: &state)
    }

    /// A writer whose kept size and last chunk may be stale (a database transaction's start) keeps them only while the
    /// log ends in its own last mark (`prepareChangeAfterOtherWriters`). Here h2 rewrites the end of h1's last frame
    /// after h1's mark, leaving the size as it was (a WAL's frames rewritten after a transaction rolled back), and the
    /// record of this process is set back to h1's mark, as if h2 were another process: h1 must find h2's records after
    /// its mark and take the last chunk from the file. A writer that trusted its own mark without reading on would
    /// re-seal its old last chunk over h2's bytes.
    func testAWriterKeepsWhatItKnowsOfTheFileOnlyWhileTheLogEndsInItsOwnMark() throws {
        let (files, path, synced, h1) = try loggedFile()
        var state = synced
        try append(h1, 0x91, 4120, to: &state)
        try h1.markCommit()
        h1.forgetKeptLastChunk()
        try h1.prepareChangeAfterOtherWriters()  // the log ends in h1's mark: the kept chunk is taken back
        try append(h1, 0x92, 4120, to: &state)
        try h1.markCommit()
        let mine = try XCTUnwrap(LogPositions.position(of: path))
        XCTAssertTrue(try files.read(path) == state, "h1's second frame, written from the chunk it kept")

        let h2 = try files.open(path, forWriting: true)
        h2.logCommits()
        try h2.prepareChangeAfterOtherWriters()
        try h2.write([UInt8](repeating: 0x93, count: 100), at: Int64(state.count - 100))  // the same size: only the log tells
        for i in (state.count - 100)..<state.count { state[i] = 0x93 }
        try h2.markCommit()
        LogPositions.marked(path, mine)  // h2's commit, as if made by another process
        h1.forgetKeptLastChunk()
        try h1.prepareChangeAfterOtherWriters()
        try append(h1, 0x94, 4120, to: &state)
        try h1.markCommit()
        XCTAssertTrue(try files.read(path) == state, "h1 re-sealed the chunk h2 rewrote from its own old copy")
        try commitThenDie(h2, after: 0x95, others: [h1], files, path, state: &state)
    }

    /// A writer killed in the middle of a change leaves a log that ends in no mark: the next writer refuses to continue
    /// it (its change would be rolled back with the dead one's), and the next writable open rolls the change back.
    func testALogThatEndsInNoMarkIsNotContinued() throws {
        let (files, path, synced, h1) = try loggedFile()
        var state = synced
        try append(h1, 0xD1, 4120, to: &state)
        try h1.markCommit()
        let h2 = try files.open(path, forWriting: true)
        h2.logCommits()
        try h1.append([UInt8](repeating: 0xD2, count: 5000))
        h1.abandon()
        try h2.reloadAfterOtherWriters()
        XCTAssertThrowsError(try h2.append([1, 2, 3])) { e in
            XCTAssertEqual((e as? ProtectionError)?.code, .coordinationFailed, "\(e)")
        }
        h2.close()
        let h3 = try files.open(path, forWriting: true)
        XCTAssertEqual(try h3.read(at: 0, count: state.count + 10), state)
        h3.close()
    }

    /// A mark is valid only in a log: one in a rollback journal comes from a forged or damaged journal, which recovery
    /// refuses whole, writing nothing.
    func testAMarkOutsideALogIsRefused() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: options)
        let path = "\(dir)/f"
        let bytes = [UInt8](repeating: 5, count: 9000)
        try files.write(bytes, to: path, protection: .complete)
        let disk = try readBytes(path)
        let header = try JournalFormat.encode(.init(
            kind: .rollback, binding: try .of(Array(disk[0..<176])), committedSize: Int64(disk.count), targetSize: 0, generation: Array(1...8)))
        let mark = JournalFormat.Mark(fileSize: Int64(disk.count), boot: BootIdentity.current).encoded
        let head = JournalFormat.encodeHead(.init(type: .mark, length: mark.count, offset: 0))
        let sum = try mark.withUnsafeBytes { try JournalFormat.recordChecksum(chain: Array(header[80..<112]), head: head, payload: $0) }
        try writeBytes(header + head + mark + sum, ProtectedFiles.journalPath(for: path))
        XCTAssertThrowsError(try files.recover(path)) { e in
            XCTAssertEqual((e as? ProtectionError)?.code, .untrustedFile, "\(e)")
            XCTAssertTrue("\(e)".contains("a commit mark in a journal that is no log"), "\(e)")
        }
        XCTAssertEqual(try readBytes(path), disk, "nothing written")
    }

    /// A change in a continued log that re-seals a chunk of the synced size (a WAL's frames a rolled-back transaction
    /// left, overwritten) flushes its undo record first: after a power loss the log goes back to the sync, and that
    /// chunk's synced bytes must be there to put back. The power-loss model (`PowerLossIO`, which also simulates the
    /// reboot) keeps a random subset of the unsynced pages; 40 cuts, each recovered through the real system calls.
    func testASyncedChunkChangedInAContinuedLogIsRestoredAfterAPowerLoss() throws {
        let dir = try temporaryDirectory(self)
        let root = dir + "/t", stash = dir + "/stash"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: stash, withIntermediateDirectories: true)
        let keys = try InMemoryClassKeys.random()
        for seed in 0..<40 {
            let io = PowerLossIO(cutAfter: nil, stash: stash)
            let files = ProtectedFiles(keys: keys, options: options, io: io)
            let path = "\(root)/wal\(seed)"
            var rng = TestRNG(seed: UInt64(seed))
            let synced = rng.bytes(2 * 4096 + 300)
            try files.write(synced, to: path, protection: .complete)
            let h = try files.open(path, forWriting: true)
            h.logCommits()
            try h.append([UInt8](repeating: 0xE1, count: 4120))  // begins the log: the synced last chunk, flushed
            try h.markCommit()
            try h.write([UInt8](repeating: 0xE2, count: 200), at: 100)  // chunk 0, synced, in the continued log
            try h.markCommit()
            h.abandon()
            try io.powerCut(root: root, using: &rng)
            let rebooted = ProtectedFiles(keys: keys, options: options)
            _ = try rebooted.recover(path)
            XCTAssertEqual(try rebooted.read(path), synced, "cut \(seed): the file as of its sync")
        }
    }

    /// A commit that finds the log past 1 MiB (`ProtectedFileHandle.logLimit`) syncs instead of marking: the log is
    /// emptied, so a reboot takes the file back to that commit, not to the sync hundreds of commits before.
    func testALongLogIsEmptiedByTheCommitThatPassesItsLimit() throws {
        let (files, path, synced, h) = try loggedFile()
        var state = synced
        var durable = synced
        for i in 0..<600 {  // a 4,120-byte frame each: an undo record of the part of a chunk committed, 2.2 KB on average
            try append(h, UInt8(truncatingIfNeeded: i), 4120, to: &state)
            try h.markCommit()
            if try readBytes(ProtectedFiles.journalPath(for: path)).prefix(8).allSatisfy({ $0 == 0 }) { durable = state }
        }
        XCTAssertGreaterThan(durable.count, synced.count + 400 * 4120, "the log was emptied after about 470 commits")
        h.abandon()
        BootIdentity.simulateReboot()
        _ = try files.recover(path)
        XCTAssertEqual(try files.read(path), durable, "a reboot goes back to the commit that emptied the log")
    }
}
