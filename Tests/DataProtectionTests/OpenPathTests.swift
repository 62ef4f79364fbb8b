import DataProtectionFormat
import SystemLayer
import Foundation
@_spi(Testing) import DataProtection  // the testing SPI: the file-system seam, test hooks
import Locking
import ProtectionCrypto
import Synchronization
import XCTest

/// The real system calls, returning at most `limit` bytes from each `pread`.
///
/// It simulates a file system that returns short reads before the end of a file (some
/// network and FUSE ones may; local ones never do), which the one-`pread` open must not
/// mistake for a truncated file.
final class ShortReadIO: ForwardingIO {
    let real = SystemFileIO()
    let limit: Int
    init(limit: Int) { self.limit = limit }
    func pread(_ fd: Int32, into b: UnsafeMutableRawBufferPointer, at o: Int64) throws(SystemError) -> Int {
        try real.pread(fd, into: UnsafeMutableRawBufferPointer(rebasing: b[0..<min(b.count, limit)]), at: o)
    }
}

/// The real system calls, recording which descriptors are open and every `close` of one that is not.
///
/// A second `close` of a descriptor is a real hazard in a threaded service: by then another
/// thread may have been given the same number for its own file.
final class DescriptorLedgerIO: ForwardingIO {
    let real = SystemFileIO()
    let ledger = Locked((open: Set<Int32>(), strayCloses: [Int32]()))
    func open(_ path: String, flags: Int32, mode: mode_t) throws(SystemError) -> Int32 {
        let fd = try real.open(path, flags: flags, mode: mode)
        ledger.withLock { _ = $0.open.insert(fd) }
        return fd
    }
    func close(_ fd: Int32) {
        ledger.withLock { if $0.open.remove(fd) == nil { $0.strayCloses.append(fd) } }
        if fd >= 0 { real.close(fd) }
    }
}

/// Flips one byte of the file at `path`: at `offset`, or `fromEnd` bytes before its end.
private func flipByte(_ path: String, at offset: UInt64? = nil, fromEnd: UInt64 = 0) throws {
    let h = try FileHandle(forUpdating: URL(fileURLWithPath: path))
    defer { try? h.close() }
    let at = try offset ?? (h.seekToEnd() - fromEnd)
    try h.seek(toOffset: at)
    let byte = try XCTUnwrap(h.read(upToCount: 1)).first!
    try h.seek(toOffset: at)
    h.write(Data([byte ^ 0x40]))
}

final class OpenPathTests: XCTestCase {
    /// Opening small and multi-chunk files through a file system that returns short reads gives back every byte:
    /// the open that takes a short read as the end of the file confirms the end and tries again.
    func testOpenThroughShortReadsReadsEveryByte() throws {
        let dir = try temporaryDirectory(self)
        let keys = try InMemoryClassKeys.random()
        let options = ProtectedFileOptions(chunkSize: 4096)
        let good = ProtectedFiles(keys: keys, options: options)
        for limit in [1, 100, 3000, 4096 + 200] {
            let shortReads = ProtectedFiles(keys: keys, options: options, io: ShortReadIO(limit: limit))
            for size in [0, 3, 4096, 4097, 10_000, 40_000] {
                let path = "\(dir)/f-\(limit)-\(size)"
                let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
                try good.write(bytes, to: path, protection: .complete)
                XCTAssertEqual(try shortReads.read(path), bytes, "short reads of at most \(limit) bytes, \(size)-byte file")
                let h = try shortReads.open(path)
                XCTAssertEqual(try h.size, Int64(size))
                h.close()
            }
        }
    }

    /// A file damaged in its last chunk, or cut short, still fails to open through short reads, with the typed error.
    func testDamagedFileFailsThroughShortReadsToo() throws {
        let dir = try temporaryDirectory(self)
        let keys = try InMemoryClassKeys.random()
        let options = ProtectedFileOptions(chunkSize: 4096)
        let good = ProtectedFiles(keys: keys, options: options)
        let shortReads = ProtectedFiles(keys: keys, options: options, io: ShortReadIO(limit: 1000))
        let path = "\(dir)/damaged"
        try good.write([UInt8](repeating: 9, count: 5000), to: path, protection: .complete)
        try flipByte(path, fromEnd: 10)
        for files in [good, shortReads] {
            XCTAssertThrowsError(try { _ = try files.open(path) }()) { error in
                XCTAssertEqual((error as? ProtectionError)?.code, .authenticationFailed, "\(error)")
            }
        }
        let cut = "\(dir)/cut"
        try good.write([UInt8](repeating: 9, count: 9000), to: cut, protection: .complete)
        XCTAssertEqual(truncate(cut, off_t(FileHeader.size + 4096 + ChunkCipher.forNewFiles(.preferred).overhead)), 0)  // header and chunk 0 only
        for files in [good, shortReads] {
            XCTAssertThrowsError(try { _ = try files.open(cut) }()) { error in
                XCTAssertEqual((error as? ProtectionError)?.code, .authenticationFailed, "\(error)")
            }
        }
    }

    /// A failed open closes its descriptor exactly once, wherever it fails: the header, the size or the last chunk.
    func testFailedOpenClosesItsDescriptorOnce() throws {
        let dir = try temporaryDirectory(self)
        let keys = try InMemoryClassKeys.random()
        let options = ProtectedFileOptions(chunkSize: 4096)
        let good = ProtectedFiles(keys: keys, options: options)
        let io = DescriptorLedgerIO()
        let files = ProtectedFiles(keys: keys, options: options, io: io)
        let lastChunk = "\(dir)/last-chunk", header = "\(dir)/header", size = "\(dir)/size"
        for p in [lastChunk, header, size] { try good.write([UInt8](repeating: 3, count: 5000), to: p, protection: .complete) }
        try flipByte(lastChunk, fromEnd: 10)
        try flipByte(header, at: 100)  // inside the header
        XCTAssertEqual(truncate(size, off_t(FileHeader.size + 4096 + ChunkCipher.forNewFiles(.preferred).overhead + 10)), 0)  // a last chunk shorter than its tag
        for p in [lastChunk, header, size] {
            XCTAssertThrowsError(try { _ = try files.open(p) }(), p)
        }
        let ledger = io.ledger.withLock { $0 }
        XCTAssertEqual(ledger.strayCloses, [], "descriptors closed twice (or never opened)")
        XCTAssertEqual(ledger.open, [], "descriptors left open")
    }
}
