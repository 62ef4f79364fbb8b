import SystemLayer
import Foundation
@_spi(Testing) import DataProtection  // the testing SPI: the file-system seam, test hooks
// @testable: drives internal names (InternalName) and ProtectedFiles.create for dead writers, with faults through the FileIO seam.
@testable import DataProtectionFiles
import ProtectionCrypto
import Locking
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Temporary files of whole-file writes (FORMAT.md §6.6): a dead writer's is swept, a live writer's never.
///
/// A writer killed mid-write leaves its temporary file with no lock on it (the
/// kernel drops OFD locks with the process); `deadWriter` makes exactly that
/// state. A live writer is a `write(contentsOf:)` blocked reading a pipe on
/// another thread: it holds its temporary file's lock like any process would
/// (OFD locks conflict between open file descriptions, in one process too).
final class TempFileSweepTests: XCTestCase {
    let options = ProtectedFileOptions(chunkSize: 4096)

    func exists(_ p: String) -> Bool { FileManager.default.fileExists(atPath: p) }
    func listing(_ dir: String) throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: dir).sorted() }

    /// A temporary file as a writer killed half-way leaves it: a partly written protected file, unlocked.
    func deadWriter(_ files: ProtectedFiles, at tmp: String) throws {
        let h = try files.create(tmp, protection: .complete)
        try h.write([UInt8](repeating: 7, count: 10_000), at: 0)
        h.abandon()
    }

    /// A whole-file write of `path` fed from a pipe on another thread, stopped inside its fill.
    final class LiveWriter: @unchecked Sendable {
        let feed: Int32
        let done = DispatchSemaphore(value: 0)
        var failure: Error?

        init(_ files: ProtectedFiles, _ path: String, timeout: Duration = .seconds(20)) throws {
            var fds: [Int32] = [0, 0]
            guard pipe(&fds) == 0 else { throw SystemError(errno) }
            feed = fds[1]
            let source = fds[0]
            Thread.detachNewThread { [self] in
                do { try files.write(contentsOf: FileDescriptor(rawValue: source), to: path, protection: .complete) } catch { failure = error }
                Glibc.close(source)
                done.signal()
            }
            // The writer creates its temporary file, then locks it (AtomicReplace.claim), then reads the input: wait
            // for the lock, not the name, or a sweep in between takes the unlocked file for a dead writer's.
            let tmp = ProtectedFiles.temporaryPath(for: path)
            let deadline = ContinuousClock.now + timeout
            while !Self.isLockedByAnother(tmp) {
                guard done.wait(timeout: .now() + .milliseconds(1)) == .timedOut else {
                    throw WriterStopped(path: tmp, failure: failure)
                }
                guard ContinuousClock.now < deadline else { throw WriterStopped(path: tmp, failure: nil) }
            }
        }

        /// Whether another open file description holds a lock on `path` (`F_OFD_GETLK`, which takes no lock, so
        /// the writer's own `tryLock` never loses to this probe); false when nothing is there yet.
        static func isLockedByAnother(_ path: String) -> Bool {
            let fd = Glibc.open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else { return false }
            defer { Glibc.close(fd) }
            return OFDLock.isLocked(fd: fd, .exclusive, start: 0, length: 0) == .wouldBlock
        }

        /// The writer ended, or did not lock its temporary file in time, before it read any input.
        struct WriterStopped: Error, CustomStringConvertible {
            let path: String
            let failure: Error?
            var description: String { "the live writer never held the lock of '\(path)': \(failure.map { "\($0)" } ?? "timed out")" }
        }

        /// Sends the rest of the input and waits for the write to finish.
        func finish(_ bytes: [UInt8]) throws {
            _ = bytes.withUnsafeBytes { Glibc.write(feed, $0.baseAddress, $0.count) }
            Glibc.close(feed)
            XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
            if let failure { throw failure }
        }
    }

    func testNames() {
        XCTAssertEqual(ProtectedFiles.temporaryPath(for: "/a/b/c.txt"), "/a/b/.c.txt.dp.tmp")
        XCTAssertEqual(ProtectedFiles.temporaryPath(for: "Documents/x"), "Documents/.x.dp.tmp")
        for n in [".c.txt.dp.tmp", ".c.txt.dp-a1b2c3.tmp", ".c.txt.dpjournal", ".x.dp-1.tmp"] { XCTAssertTrue(ProtectedFiles.isInternalFile(named: n), n) }
        for n in ["c.txt", ".dp.tmp", ".c.dp-.tmp", ".c.dp-xyz.tmp", ".c.tmp", "c.dp.tmp", ".dpjournal"] { XCTAssertFalse(ProtectedFiles.isInternalFile(named: n), n) }
        XCTAssertEqual(InternalName(".a.b.dp-ff.tmp")?.target, "a.b")
        XCTAssertEqual(InternalName(".a.b.dp.tmp")?.target, "a.b")
    }

    func testRecoverRemovesADeadWritersTemporaryFile() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: options)
        let path = "\(dir)/f", tmp = ProtectedFiles.temporaryPath(for: path)
        try files.write([1, 2, 3], to: path, protection: .complete)
        try deadWriter(files, at: tmp)
        XCTAssertEqual(try files.recover(path), .nothingToDo, "the outcome is about the journal")
        XCTAssertFalse(exists(tmp))
        XCTAssertEqual(try files.read(path), [1, 2, 3])
        XCTAssertEqual(try listing(dir), ["f"])
    }

    func testWritableOpenRemovesADeadWritersTemporaryFile() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: options)
        let path = "\(dir)/f", tmp = ProtectedFiles.temporaryPath(for: path)
        try files.write([1, 2, 3], to: path, protection: .complete)
        try deadWriter(files, at: tmp)
        try files.open(path).close()  // a reader does not look
        XCTAssertTrue(exists(tmp))
        try files.open(path, forWriting: true).close()
        XCTAssertEqual(try listing(dir), ["f"])
    }

    func testWholeFileWriteTakesOverADeadWritersName() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: options)
        let path = "\(dir)/f"
        try deadWriter(files, at: ProtectedFiles.temporaryPath(for: path))
        try files.write([4, 5], to: path, protection: .complete)
        XCTAssertEqual(try listing(dir), ["f"])
        XCTAssertEqual(try files.read(path), [4, 5])
        try files.unprotectInPlace(path)
        XCTAssertEqual(try listing(dir), ["f"])
    }

    func testALiveWritersTemporaryFileIsNeverRemoved() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: options)
        let path = "\(dir)/f", tmp = ProtectedFiles.temporaryPath(for: path)
        try files.write([1], to: path, protection: .complete)
        let writer = try LiveWriter(files, path)
        XCTAssertTrue(exists(tmp), "the live writer's temporary file")

        XCTAssertEqual(try files.recover(path), .nothingToDo)
        try files.open(path, forWriting: true).close()
        let report = try files.recoverTree(dir)
        XCTAssertEqual(report.entries, [.init(path: tmp, action: .temporaryFileInUse)])
        XCTAssertEqual(report.inUse, 1)
        XCTAssertEqual(try ProtectedFiles.recoverTree(path).entries, [.init(path: tmp, action: .temporaryFileInUse)])
        // A second whole-file write meanwhile takes a random name, and leaves nothing behind.
        try files.write([2], to: path, protection: .complete)
        XCTAssertEqual(try files.read(path), [2])
        XCTAssertEqual(try listing(dir), [".f.dp.tmp", "f"])

        let late = [UInt8](repeating: 9, count: 50_000)
        try writer.finish(late)
        XCTAssertEqual(try files.read(path), late, "the live writer finished its replace")
        XCTAssertEqual(try listing(dir), ["f"])
    }

    func testRecoverTreeCountsWhatItDid() throws {
        let dir = try temporaryDirectory(self)
        let sub = "\(dir)/sub/deeper"
        try FileManager.default.createDirectory(atPath: sub, withIntermediateDirectories: true)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: options)
        // A hot journal: an in-place change never committed.
        let a = "\(dir)/a"
        let old = [UInt8](repeating: 1, count: 20_000)
        try files.write(old, to: a, protection: .complete)
        let h = try files.open(a, forWriting: true)
        try h.write([UInt8](repeating: 2, count: 5000), at: 100)
        h.abandon()
        // Dead writers' temporary files, under both names; a stale journal of a file deleted since.
        try files.write([3], to: "\(sub)/b", protection: .complete)
        try deadWriter(files, at: ProtectedFiles.temporaryPath(for: "\(sub)/b"))
        try deadWriter(files, at: "\(sub)/.c.dp-0a1b2c.tmp")
        try writeBytes([], ProtectedFiles.journalPath(for: "\(dir)/gone"))
        // A live writer, and an ordinary hidden file that is none of these.
        let writer = try LiveWriter(files, "\(sub)/live")
        try writeBytes([1], "\(sub)/.profile.tmp")

        let report = try files.recoverTree(dir)
        XCTAssertEqual(report.rolledBack, 1)
        XCTAssertEqual(report.entries.first { $0.path == a }?.action, .rolledBack(chunks: 2))
        XCTAssertEqual(report.rolledForward, 0)
        XCTAssertEqual(report.journalsDiscarded, 1)
        XCTAssertEqual(report.temporaryFilesRemoved, 2)
        XCTAssertEqual(report.inUse, 1)
        XCTAssertEqual(report.failures.count, 0)
        XCTAssertEqual(try files.read(a), old)
        XCTAssertEqual(try listing(sub), [".live.dp.tmp", ".profile.tmp", "b"])
        XCTAssertEqual(try listing(dir), ["a", "sub"])

        let again = try files.recoverTree(dir)
        XCTAssertEqual(again.entries, [.init(path: ProtectedFiles.temporaryPath(for: "\(sub)/live"), action: .temporaryFileInUse)])
        try writer.finish([5])
        XCTAssertEqual(try files.recoverTree(dir).entries, [])
        XCTAssertEqual(try files.read("\(sub)/live"), [5])
        assertProtectionError([.notFound]) { _ = try files.recoverTree("\(dir)/nothing-here") }
    }

    func testRecoverTreeOfOneFileFindsItsRandomlyNamedTemporaryFiles() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: options)
        try files.write([1], to: "\(dir)/f", protection: .complete)
        try deadWriter(files, at: "\(dir)/.f.dp-12ab.tmp")
        try deadWriter(files, at: "\(dir)/.g.dp-12ab.tmp")
        let report = try files.recoverTree("\(dir)/f")
        XCTAssertEqual(report.entries, [.init(path: "\(dir)/.f.dp-12ab.tmp", action: .temporaryFileRemoved)])
        XCTAssertEqual(try listing(dir), [".g.dp-12ab.tmp", "f"])
        // A file deleted since still has its litter found.
        try FileManager.default.removeItem(atPath: "\(dir)/f")
        try deadWriter(files, at: "\(dir)/.f.dp.tmp")
        XCTAssertEqual(try files.recoverTree("\(dir)/f").temporaryFilesRemoved, 1)
    }

    /// A sweeper that locks a writer's brand-new temporary file before the writer does takes it
    /// for a dead one and removes it; the writer notices and moves to another name.
    func testAWriterThatLosesItsNewTemporaryFileToASweeperMovesOn() throws {
        let dir = try temporaryDirectory(self)
        let io = SweepingFirstIO()
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: options, io: io)
        let path = "\(dir)/f"
        try files.write([1, 2], to: path, protection: .complete)
        XCTAssertEqual(io.swept.withLock { $0 }, [ProtectedFiles.temporaryPath(for: path)])
        XCTAssertEqual(try files.read(path), [1, 2])
        XCTAssertEqual(try listing(dir), ["f"])
    }
}

/// The real calls, except that the first lock taken by a whole-file writer is preceded by a sweep of its name.
final class SweepingFirstIO: FileIO {
    let base = SystemFileIO()
    let swept = Locked<[String]>([])
    let paths = Locked<[Int32: String]>([:])

    func open(_ path: String, flags: Int32, mode: mode_t) throws(SystemError) -> Int32 {
        let fd = try base.open(path, flags: flags, mode: mode)
        if flags & O_EXCL != 0 { paths.withLock { $0[fd] = path } }
        return fd
    }
    func openAt(_ dir: Int32, _ name: String, flags: Int32, mode: mode_t) throws(SystemError) -> Int32 {
        let fd = try base.openAt(dir, name, flags: flags, mode: mode)
        if flags & O_EXCL != 0 { paths.withLock { $0[fd] = directoryPath(dir) + "/" + name } }
        return fd
    }
    func renameAt(_ dir: Int32, _ from: String, to: String) throws(SystemError) { try base.renameAt(dir, from, to: to) }
    func unlinkAt(_ dir: Int32, _ name: String) throws(SystemError) { try base.unlinkAt(dir, name) }
    func identityAt(_ dir: Int32, _ name: String) throws(SystemError) -> (device: UInt64, inode: UInt64) { try base.identityAt(dir, name) }
    func copyUserAttributes(at dir: Int32, from name: String, to fd: Int32) throws(SystemError) { try base.copyUserAttributes(at: dir, from: name, to: fd) }
    func close(_ fd: Int32) {
        paths.withLock { _ = $0.removeValue(forKey: fd) }
        base.close(fd)
    }
    func tryLockExclusive(_ fd: Int32) throws(SystemError) -> Bool {
        if let p = paths.withLock({ $0[fd] }), swept.withLock({ $0.isEmpty }) {
            swept.withLock { $0.append(p) }
            XCTAssertEqual(try AtomicReplace.sweep(p, io: base), .removed)
        }
        return try base.tryLockExclusive(fd)
    }
    func pread(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(SystemError) -> Int { try base.pread(fd, into: buffer, at: offset) }
    func pwrite(_ fd: Int32, from buffer: UnsafeRawBufferPointer, at offset: Int64) throws(SystemError) -> Int { try base.pwrite(fd, from: buffer, at: offset) }
    func fsync(_ fd: Int32) throws(SystemError) { try base.fsync(fd) }
    func ftruncate(_ fd: Int32, to size: Int64) throws(SystemError) { try base.ftruncate(fd, to: size) }
    func size(_ fd: Int32) throws(SystemError) -> Int64 { try base.size(fd) }
    func rename(_ from: String, to: String) throws(SystemError) { try base.rename(from, to: to) }
    func unlink(_ path: String) throws(SystemError) { try base.unlink(path) }
    func unlock(_ fd: Int32) { base.unlock(fd) }
    func identity(_ fd: Int32) throws(SystemError) -> (device: UInt64, inode: UInt64) { try base.identity(fd) }
}
