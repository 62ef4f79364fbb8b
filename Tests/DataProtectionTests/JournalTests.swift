import DataProtectionFormat
import SystemLayer
import Foundation
@_spi(Testing) import DataProtection  // the testing SPI: the file-system seam, test hooks
// @testable: crashes writers through the internal FileIO seam (the system-layer branch reworks the seam); the journal format is DataProtectionFormat's public API.
@testable import DataProtectionFiles
import ProtectionCrypto
import XCTest
import PathSyntax

/// The rollback journal of in-place writes (FORMAT.md §6.7): layout, recovery, readers, writers, litter.
final class JournalTests: XCTestCase {
    let options = ProtectedFileOptions(chunkSize: 4096)
    /// Where chunk `i` starts on disk.
    func chunkOffset(_ i: Int) -> Int { 176 + i * (4096 + ChunkCipher.forNewFiles(options.cipher).overhead) }

    /// A committed file of `count` bytes of pattern `seed`, written atomically.
    func committedFile(_ files: ProtectedFiles, _ path: String, count: Int = 10 * 4096 + 100, seed: UInt64 = 1) throws -> [UInt8] {
        var rng = TestRNG(seed: seed)
        let bytes = rng.bytes(count)
        try files.write(bytes, to: path, protection: .complete)
        return bytes
    }

    func journalExists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: ProtectedFiles.journalPath(for: path)) }

    func testJournalPathIsAHiddenSidecar() {
        XCTAssertEqual(ProtectedFiles.journalPath(for: "/a/b/c.txt"), "/a/b/.c.txt.dpjournal")
        XCTAssertEqual(ProtectedFiles.journalPath(for: "c.txt"), ".c.txt.dpjournal")
        XCTAssertEqual(ProtectedFiles.journalPath(for: "/c"), "/.c.dpjournal")
        XCTAssertEqual(ProtectedFiles.journalPath(for: "Documents/x"), "Documents/.x.dpjournal")
        // U+0600 is a Unicode "prepend" mark: as Characters, "\u{600}/" is one grapheme and holds no "/".
        // Paths split at the byte, so the journal still lands beside the file.
        XCTAssertEqual(ProtectedFiles.journalPath(for: "d\u{600}/f\u{301}"), "d\u{600}/.f\u{301}.dpjournal")
        XCTAssertEqual(parentDirectory(of: "a/d\u{600}/f"), "a/d\u{600}")
        XCTAssertEqual(lastComponent(of: "a/d\u{600}/f"), "f")
        XCTAssertEqual(parentDirectory(of: "/f"), "/")
        XCTAssertEqual(parentDirectory(of: "f"), ".")
        XCTAssertEqual(lastComponent(of: "f"), "f")
    }

    func testLayoutRoundTripAndChecksums() throws {
        let h = JournalFormat.Header(kind: .truncate, binding: .headerHash(Array(1...32)), committedSize: 99_000, targetSize: 5_000, generation: Array(40..<48))
        let bytes = try JournalFormat.encode(h)
        XCTAssertEqual(bytes.count, JournalFormat.headerSize)
        XCTAssertEqual(Array(bytes[0..<9]), [0x89, 0x44, 0x50, 0x4A, 0x0D, 0x0A, 0x1A, 0x0A, 2])
        XCTAssertEqual(Array(bytes[16..<48]), Array(1...32), "the data header's hash at 16")
        let parsed = try XCTUnwrap(JournalFormat.parseHeader(bytes))
        XCTAssertEqual(parsed.0, h)
        XCTAssertEqual(parsed.checksum, Array(bytes[80..<112]))
        for i in 0..<bytes.count {  // every flipped bit of the header is noticed
            var bad = bytes
            bad[i] ^= 0x10
            XCTAssertNil(JournalFormat.parseHeader(bad), "byte \(i)")
        }
        XCTAssertNil(JournalFormat.parseHeader(Array(bytes[0..<111])), "a torn header")
        // Version 1 (bound by file identifier, 96 bytes), as a writer before version 2 left it, still parses.
        let v1 = JournalFormat.Header(kind: .truncate, binding: .fileID(Array(1...16)), committedSize: 99_000, targetSize: 5_000, generation: Array(20..<28))
        let v1bytes = try JournalFormat.encode(v1)
        XCTAssertEqual(v1bytes.count, JournalFormat.version1HeaderSize)
        XCTAssertEqual(v1bytes[8], 1)
        XCTAssertEqual(try XCTUnwrap(JournalFormat.parseHeader(v1bytes + [1, 2, 3])).0, v1, "records follow at 96")
        var rollback = h
        rollback.kind = .rollback
        XCTAssertNil(JournalFormat.parseHeader(try JournalFormat.encode(rollback)), "a rollback journal has no target size")

        let head = JournalFormat.RecordHead(type: .undo, length: 4124, offset: 176 + 3 * 4124)
        let hb = JournalFormat.encodeHead(head)
        XCTAssertEqual(hb.count, JournalFormat.recordHeadSize)
        XCTAssertEqual(JournalFormat.parseHead(hb), head)
        XCTAssertNil(JournalFormat.parseHead([9] + hb.dropFirst()), "unknown record type")
        let payload: [UInt8] = Array(repeating: 7, count: 100)
        let sum = try payload.withUnsafeBytes { try JournalFormat.recordChecksum(chain: parsed.checksum, head: hb, payload: $0) }
        var other = payload
        other[50] = 8
        XCTAssertNotEqual(sum, try other.withUnsafeBytes { try JournalFormat.recordChecksum(chain: parsed.checksum, head: hb, payload: $0) })
        XCTAssertNotEqual(sum, try payload.withUnsafeBytes { try JournalFormat.recordChecksum(chain: Array(repeating: 0, count: 32), head: hb, payload: $0) },
                          "records chain to their own journal's header")
    }

    /// In-place writes, an append and an extension, then the process dies: recovery puts back every chunk.
    func testRecoveryRestoresEveryChunk() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: options)
        let path = "\(dir)/f"
        let old = try committedFile(files, path)
        let h = try files.open(path, forWriting: true)
        XCTAssertFalse(journalExists(path), "no journal before the first change")
        try h.write([UInt8](repeating: 0xAA, count: 9000), at: 5000)
        try h.write([UInt8](repeating: 0xBB, count: 10), at: 40_000)
        try h.append([UInt8](repeating: 0xCC, count: 20_000))
        try h.truncate(to: 100_000)
        XCTAssertTrue(journalExists(path))
        h.abandon()
        XCTAssertEqual(try files.recover(path), .rolledBack(chunks: 5), "chunks 1, 2, 3, 9 and the old last chunk 10")
        XCTAssertFalse(journalExists(path))
        XCTAssertEqual(try files.read(path), old)
        XCTAssertEqual(try files.recover(path), .nothingToDo)
    }

    /// Chunks written in place are torn on disk (as after a power cut): the writable open rolls them back.
    func testWritableOpenRollsBackTornChunks() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: options)
        let path = "\(dir)/f"
        let old = try committedFile(files, path)
        let h = try files.open(path, forWriting: true)
        try h.write([UInt8](repeating: 0xAA, count: 3 * 4096), at: 4096)
        h.abandon()
        var raw = try readBytes(path)
        for i in chunkOffset(1) + 100..<chunkOffset(1) + 2000 { raw[i] = 0 }  // a torn chunk
        try writeBytes(raw, path)
        let again = try files.open(path, forWriting: true)
        XCTAssertEqual(try again.read(at: 0, count: old.count), old)
        again.close()
        XCTAssertFalse(journalExists(path))
    }

    /// A torn header means the writer never got to touch the file: the journal is dropped, the file left alone.
    /// A torn last record is ignored; the records before it are applied.
    func testTornJournalIsIgnored() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: options)
        let path = "\(dir)/f"
        let old = try committedFile(files, path)
        let h = try files.open(path, forWriting: true)
        try h.write([UInt8](repeating: 0xAA, count: 10), at: 0)
        try h.write([UInt8](repeating: 0xAB, count: 10), at: 3 * 4096)
        h.abandon()
        let jpath = ProtectedFiles.journalPath(for: path)
        let journal = try readBytes(jpath)
        // The records end where the second record's checksum ends; zeros the writer wrote ahead may follow (§6.7.3).
        func recordEnd(_ at: Int) -> Int { at + 16 + journal[(at + 4)..<(at + 8)].reduce(0) { $0 << 8 | Int($1) } + 32 }
        let end = recordEnd(recordEnd(JournalFormat.headerSize))
        XCTAssertTrue(journal[end...].allSatisfy { $0 == 0 }, "only zeros after the records")
        try writeBytes(Array(journal[0..<(end - 1)]), jpath)  // the second record torn
        XCTAssertEqual(try files.recover(path), .rolledBack(chunks: 1))
        XCTAssertFalse(journalExists(path))
        var expect = old
        expect.replaceSubrange(3 * 4096..<3 * 4096 + 10, with: [UInt8](repeating: 0xAB, count: 10))
        XCTAssertEqual(try files.read(path), expect, "chunk 0 rolled back, chunk 3 (its record torn) as written")
        try writeBytes(Array(journal[0..<50]), jpath)  // a torn header
        XCTAssertEqual(try files.recover(path), .discarded)
        XCTAssertFalse(journalExists(path))
        XCTAssertEqual(try files.read(path), expect, "a torn header leaves the file as it is")
        try writeBytes([], jpath)  // an empty journal (a commit that reached the disk)
        XCTAssertEqual(try files.recover(path), .discarded)
        XCTAssertFalse(journalExists(path))
    }

    /// A truncate stopped at each of its steps ends either before it (rolled back) or complete (rolled forward).
    func testTruncateRollsForwardOrBack() throws {
        let dir = try temporaryDirectory(self)
        let keys = try InMemoryClassKeys.random()
        let files = ProtectedFiles(keys: keys, options: options)
        var outcomes: Set<String> = []
        var n = 1
        while true {
            let path = "\(dir)/t\(n)"
            let old = try committedFile(files, path)
            let io = FaultyIO(failAt: n, mode: .eio, forever: true)
            let faulty = ProtectedFiles(keys: keys, options: options, io: io)
            var done = false
            do {
                let h = try faulty.open(path, forWriting: true)
                defer { h.abandon() }
                try h.truncate(to: 5000)
                done = true
            } catch {
                XCTAssertEqual(error.code, .io(EIO))
            }
            let outcome = try files.recover(path)
            outcomes.insert("\(outcome)")
            let now = try files.read(path)
            switch outcome {
            case .rolledForward: XCTAssertEqual(now, Array(old[0..<5000]), "call \(n)")
            case .rolledBack: XCTAssertEqual(now, old, "call \(n)")
            case .nothingToDo, .discarded: XCTAssertTrue(now == old || now == Array(old[0..<5000]), "call \(n)")
            case .inUse: XCTFail("nobody holds the journal")
            }
            XCTAssertFalse(journalExists(path))
            if done && !io.fired.load(ordering: .relaxed) { break }
            n += 1
        }
        XCTAssertTrue(outcomes.contains("rolledForward"), "\(outcomes)")
        XCTAssertTrue(outcomes.contains { $0.hasPrefix("rolledBack") }, "\(outcomes)")
    }

    /// Recovery reads and writes ciphertext only: it works with no class key at all.
    func testRecoveryNeedsNoKeys() throws {
        let dir = try temporaryDirectory(self)
        let keys = try InMemoryClassKeys.random()
        let files = ProtectedFiles(keys: keys, options: options)
        let path = "\(dir)/f"
        let old = try committedFile(files, path)
        let h = try files.open(path, forWriting: true)
        try h.write([UInt8](repeating: 1, count: 30_000), at: 1000)
        h.abandon()
        let keyless = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: options)  // other keys: this file's class key is absent
        XCTAssertEqual(try keyless.recover(path), .rolledBack(chunks: 8))
        XCTAssertEqual(try files.read(path), old)
    }

    /// A reader that meets a torn chunk finishes the interrupted write, then reads the committed contents.
    func testReadersRecoverOnAuthenticationFailure() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: options)
        let path = "\(dir)/f"
        let old = try committedFile(files, path)
        for reader in ["whole", "handle"] {
            let h = try files.open(path, forWriting: true)
            try h.write([UInt8](repeating: 9, count: 100), at: 20_000)
            h.abandon()
            var raw = try readBytes(path)
            raw[chunkOffset(4) + 2000] ^= 1  // chunk 4, where the write went, torn
            try writeBytes(raw, path)
            if reader == "whole" {
                XCTAssertEqual(try files.read(path), old)
            } else {
                let r = try files.open(path)  // the last chunk is fine: open succeeds, the read meets chunk 4
                XCTAssertEqual(try r.read(at: 0, count: old.count), old)
                r.close()
            }
            XCTAssertFalse(journalExists(path), reader)
        }
    }

    /// A reader that cannot write the file says what is wrong and how to fix it.
    func testReaderThatCannotRecoverNamesTheFix() throws {
        let dir = try temporaryDirectory(self)
        let keys = try InMemoryClassKeys.random()
        let files = ProtectedFiles(keys: keys, options: options)
        let path = "\(dir)/f"
        let old = try committedFile(files, path)
        let h = try files.open(path, forWriting: true)
        try h.write([UInt8](repeating: 9, count: 100), at: 20_000)
        h.abandon()
        var raw = try readBytes(path)
        raw[chunkOffset(4) + 2000] ^= 1
        try writeBytes(raw, path)
        let reader = ProtectedFiles(keys: keys, options: options, io: ReadOnlyIO())  // as a user who may not write the file
        do {
            _ = try reader.read(path)
            XCTFail("a torn chunk must not read")
        } catch {
            XCTAssertEqual(error.code, .authenticationFailed)
            XCTAssertTrue(error.message.contains("open the file for writing"), error.message)
        }
        XCTAssertTrue(journalExists(path), "the journal stays for a user who can apply it")
        XCTAssertEqual(try files.read(path), old)
        XCTAssertFalse(journalExists(path))
    }

    /// One journal, one writer: a second handle that needs it while the first holds it gets a typed error.
    func testSecondWriterGetsTypedError() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: options)
        let path = "\(dir)/f"
        var model = try committedFile(files, path)
        let a = try files.open(path, forWriting: true)
        try a.write([1, 2, 3], at: 0)
        model.replaceSubrange(0..<3, with: [1, 2, 3])
        let b = try files.open(path, forWriting: true)  // recovery sees a live writer and leaves its journal alone
        do {
            try b.write([4], at: 100)
            XCTFail("the second writer must be refused while the first holds the journal")
        } catch {
            XCTAssertEqual(error.code, .coordinationFailed)
            XCTAssertTrue(error.message.contains(path) && error.message.contains("FileCoordinator"), error.message)
        }
        try a.sync()  // committed: the journal is free
        try b.write([4], at: 100)
        model[100] = 4
        do {
            try a.write([5], at: 200)
            XCTFail("now the first writer waits for the second")
        } catch { XCTAssertEqual(error.code, .coordinationFailed) }
        b.close()
        a.close()
        XCTAssertEqual(try files.read(path), model)
        XCTAssertFalse(journalExists(path))
    }

    /// sync + close, or close alone, leave no journal behind; a created file journals only once committed.
    func testNoJournalLitter() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: options)
        let path = "\(dir)/f"
        let h = try files.create(path, protection: .complete)
        try h.write([UInt8](repeating: 1, count: 50_000), at: 0)
        XCTAssertFalse(journalExists(path), "a created file has nothing to roll back to before its first sync")
        try h.sync()
        try h.write([2], at: 10)
        XCTAssertTrue(journalExists(path))
        try h.sync()
        try h.append([3])
        h.close()  // commits
        XCTAssertFalse(journalExists(path))
        var expect = [UInt8](repeating: 1, count: 50_000)
        expect[10] = 2
        expect.append(3)
        XCTAssertEqual(try files.read(path), expect)
        XCTAssertEqual(try files.recover(path), .nothingToDo)
        // A whole-file replace drops a journal left about the old file.
        let w = try files.open(path, forWriting: true)
        try w.write([9], at: 0)
        w.abandon()
        try files.write([7, 7], to: path, protection: .complete)
        XCTAssertFalse(journalExists(path))
        XCTAssertEqual(try files.read(path), [7, 7])
        let litter = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0 != "f" }
        XCTAssertEqual(litter, [])
    }

    func testRecoverWithoutJournalIsANoOp() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: options)
        let path = "\(dir)/f"
        let old = try committedFile(files, path)
        let before = try readBytes(path)
        XCTAssertEqual(try files.recover(path), .nothingToDo)
        XCTAssertEqual(try readBytes(path), before)
        XCTAssertEqual(try files.read(path), old)
        XCTAssertEqual(try files.recover("\(dir)/missing"), .nothingToDo)
    }

    /// A journal whose file was replaced (another file identifier) is not applied to the new file.
    func testStaleJournalIsNotApplied() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: options)
        let path = "\(dir)/f", other = "\(dir)/g"
        _ = try committedFile(files, path)
        let fresh = try committedFile(files, other, seed: 2)
        let h = try files.open(path, forWriting: true)
        try h.write([1], at: 0)
        h.abandon()
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.moveItem(atPath: other, toPath: path)  // not through the library: the journal stays
        XCTAssertEqual(try files.recover(path), .discarded)
        XCTAssertEqual(try files.read(path), fresh)
    }
}

/// The real system calls, except that opening for writing is refused (EACCES), as for a user without write access.
struct ReadOnlyIO: ForwardingIO {
    let real = SystemFileIO()
    func open(_ path: String, flags: Int32, mode: mode_t) throws(SystemError) -> Int32 {
        if flags & O_ACCMODE != O_RDONLY { throw SystemError(EACCES) }
        return try real.open(path, flags: flags, mode: mode)
    }
}
