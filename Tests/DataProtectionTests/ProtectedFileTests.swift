import DataProtectionFormat
import SystemLayer
import Foundation
@_spi(Testing) import DataProtection  // the testing SPI: the file-system seam, test hooks
// @testable: checks a handle's internal staging memory, batch sizes and revocation.
@testable import DataProtectionFiles
import ProtectionCrypto
import Synchronization
import XCTest

final class ProtectedFileTests: XCTestCase {
    let sizes = [0, 1, 4095, 4096, 4097, 3 * 4096 + 7]

    func testRoundTripEveryClassCipherAndSize() throws {
        let dir = try temporaryDirectory(self)
        let keys = try InMemoryClassKeys.random()
        var rng = TestRNG(seed: 1)
        for cipher in AEADCipher.allCases where cipher.isAvailable {
            let files = ProtectedFiles(keys: keys, options: .init(cipher: cipher, chunkSize: 4096))
            for c in ProtectionClass.allCases {
                for n in sizes {
                    let path = "\(dir)/\(cipher.rawValue)-\(c.name)-\(n)"
                    let data = rng.bytes(n)
                    try files.write(data, to: path, protection: c)
                    XCTAssertEqual(try files.read(path), data, "\(cipher) \(c) \(n)")
                    let info = try files.info(path)
                    XCTAssertEqual(info.protectionClass, c)
                    XCTAssertEqual(info.cipher, cipher)
                    XCTAssertEqual(info.plaintextSize, Int64(n))
                    XCTAssertEqual(Int64(try readBytes(path).count), ChunkLayout(headerSize: 176, chunkSize: 4096, overhead: ChunkCipher.forNewFiles(cipher).overhead).fileSize(forPlaintextSize: Int64(n)))
                }
            }
        }
        // No temporary litter from the atomic writes.
        XCTAssertFalse(try FileManager.default.contentsOfDirectory(atPath: dir).contains { $0.hasSuffix(".tmp") })
    }

    /// A streamed whole-file write fsyncs the file and its directory unless told not to; either way
    /// the replacement is complete and reads back.
    func testStreamedWriteIsDurableUnlessToldNot() throws {
        let dir = try temporaryDirectory(self)
        let io = FsyncCountingIO()
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), io: io)
        let source = "\(dir)/plain", target = "\(dir)/f"
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try Data(bytes).write(to: URL(fileURLWithPath: source))
        for durable in [true, false] {
            let fd = open(source, O_RDONLY)
            defer { close(fd) }
            let before = io.fsyncs.load(ordering: .relaxed)
            try files.write(contentsOf: FileDescriptor(rawValue: fd), to: target, protection: .complete, durable: durable)
            let synced = io.fsyncs.load(ordering: .relaxed) - before
            if durable { XCTAssertGreaterThanOrEqual(synced, 2, "file and directory") } else { XCTAssertEqual(synced, 0) }
            XCTAssertEqual(try files.read(target), bytes)
        }
    }

    /// A handle given to the caller keeps at most one 1 MiB batch of chunks between calls, plus the slot that holds the
    /// last chunk's plaintext, however large the calls (a lock zeroes it, and it lives as long as the handle); only the
    /// handles behind whole-file streams, which close when the stream ends, use larger batches.
    func testCallersHandleKeepsOneSmallBatch() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random())
        let bytes = (0..<(9 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 12) }
        let h = try files.create("\(dir)/f", protection: .complete)
        defer { h.close() }
        try h.write(bytes, at: 0)
        let batch = ProtectedFileHandle.batchBytes / h.chunkSize
        let limit = (batch + 1) * h.layout.stride
        XCTAssertLessThanOrEqual(h.stagingBytes, limit)
        XCTAssertEqual(try h.read(at: 0, count: bytes.count), bytes)
        XCTAssertLessThanOrEqual(h.stagingBytes, limit)
        XCTAssertGreaterThan(ProtectedFileHandle.streamingBatchBytes, ProtectedFileHandle.batchBytes)
    }

    /// A handle stages plaintext (the chunks it last sealed or opened, and the kept last chunk); closing it zeroes that
    /// buffer, for writers and readers alike, so no plaintext is left in memory the handle frees. (Checked on the
    /// buffer itself between the close and the handle's end; a lock's revoke is checked the same way.)
    func testCloseAndRevokeZeroTheStagedPlaintext() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random())
        let bytes = [UInt8](repeating: 0xA5, count: 3 * 4096 + 100)
        let w = try files.create("\(dir)/f", protection: .complete)
        try w.write(bytes, at: 0)
        XCTAssertFalse(w.stagingIsZeroed, "the write left plaintext staged")
        w.close()
        XCTAssertTrue(w.stagingIsZeroed)
        let r = try files.open("\(dir)/f")
        XCTAssertEqual(try r.read(at: 0, count: 10), Array(bytes[0..<10]))
        XCTAssertFalse(r.stagingIsZeroed, "the read left plaintext staged")
        r.close()
        XCTAssertTrue(r.stagingIsZeroed)
        let l = try files.open("\(dir)/f")
        defer { l.close() }
        _ = try l.read(at: 0, count: bytes.count)
        XCTAssertFalse(l.stagingIsZeroed)
        l.revoke { _ in true }  // as a lock of its class does
        XCTAssertTrue(l.stagingIsZeroed)
    }

    /// An append re-seals the old last chunk (its "last" flag changes) from the plaintext the handle kept when it sealed
    /// it, with no read and no open of it; a write elsewhere keeps that copy, a truncate drops it, and the file reads
    /// back as written through a new handle.
    func testAppendsReuseTheKeptLastChunk() throws {
        let dir = try temporaryDirectory(self)
        let io = ReadCountingIO()
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: .init(chunkSize: 4096), io: io)
        var model = (0..<6000).map { UInt8(truncatingIfNeeded: $0) }
        let h = try files.create("\(dir)/f", protection: .complete)
        try h.write(model, at: 0)
        func appendSome(_ count: Int) throws -> Int {
            let before = io.reads.load(ordering: .relaxed)
            for k in 0..<count {
                let piece = (0..<(700 + 37 * k)).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ k) }
                try h.append(piece)
                model += piece
            }
            return io.reads.load(ordering: .relaxed) - before
        }
        XCTAssertEqual(try appendSome(20), 0, "appends read the file")
        // A partial write inside the file reads its own chunk, and leaves the kept last chunk as it was.
        try h.write([9, 9, 9], at: 5000)
        model.replaceSubrange(5000..<5003, with: [9, 9, 9])
        XCTAssertEqual(try appendSome(5), 0, "an append after a write elsewhere read the file")
        // A truncate re-seals a new last chunk in place: the next append reads it once, the ones after it not.
        try h.truncate(to: Int64(model.count - 3000))
        model.removeLast(3000)
        XCTAssertEqual(try appendSome(1), 1)
        XCTAssertEqual(try appendSome(5), 0)
        h.close()
        // Opened again for writing: open authenticates the last chunk, and appends use it. The first one also copies
        // that chunk's sealed bytes, as committed, into the rollback journal (one read), and reads the file's header,
        // which the journal is bound to (one more, FORMAT.md §6.7.3); the ones after it, nothing.
        let w = try files.open("\(dir)/f", forWriting: true)
        let readsOf = { (count: Int) throws -> Int in
            let before = io.reads.load(ordering: .relaxed)
            for k in 0..<count { let piece = [UInt8](repeating: UInt8(k), count: 3000); try w.append(piece); model += piece }
            return io.reads.load(ordering: .relaxed) - before
        }
        XCTAssertEqual(try readsOf(1), 2)
        XCTAssertEqual(try readsOf(5), 0)
        w.close()
        XCTAssertEqual(try ProtectedFiles(keys: files.keys, options: .init(chunkSize: 4096)).read("\(dir)/f"), model)
    }

    func testDefaultsAreMeasuredChoices() {
        let o = ProtectedFileOptions()
        XCTAssertEqual(o.chunkSize, 4096)  // FORMAT.md §8: random 4 KiB access, same sequential speed
        XCTAssertEqual(o.cipher, AEADCipher.aes256gcm.isAvailable ? .aes256gcm : .xchacha20poly1305)
    }

    func testLockedClassFailsCleanlyAndOtherKeysCannotRead() throws {
        let dir = try temporaryDirectory(self)
        let keys = try InMemoryClassKeys.random()
        let files = ProtectedFiles(keys: keys)
        for c in ProtectionClass.allCases { try files.write([1, 2, 3], to: "\(dir)/\(c.name)", protection: c) }
        keys.lock()
        assertProtectionError([.locked]) { _ = try files.read("\(dir)/complete") }
        assertProtectionError([.locked]) { _ = try files.read("\(dir)/completeUnlessOpen") }
        XCTAssertEqual(try files.read("\(dir)/completeUntilFirstUserAuthentication"), [1, 2, 3])
        XCTAssertEqual(try files.read("\(dir)/none"), [1, 2, 3])
        // Creating class A fails while locked and leaves nothing behind; class B succeeds.
        assertProtectionError([.locked]) { try files.write([9], to: "\(dir)/new-a", protection: .complete) }
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(dir)/new-a"))
        try files.write([7, 7], to: "\(dir)/new-b", protection: .completeUnlessOpen)
        assertProtectionError([.locked]) { _ = try files.read("\(dir)/new-b") }
        // The error names the file and the fix.
        do { _ = try files.read("\(dir)/complete") } catch {
            let e = error
            XCTAssertTrue(e.message.contains("complete") && e.message.contains("dpctl unlock"), e.message)
            XCTAssertEqual(e.path, "\(dir)/complete")
        }
        // Another domain's keys cannot open the file.
        let stranger = ProtectedFiles(keys: try InMemoryClassKeys.random())
        assertProtectionError([.authenticationFailed]) { _ = try stranger.read("\(dir)/none") }
    }

    func testHandleReadWriteAppendTruncateHole() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: .init(chunkSize: 4096))
        let path = "\(dir)/f"
        let h = try files.create(path, protection: .complete)
        XCTAssertEqual(try h.size, 0)
        try h.write(Array(repeating: 1, count: 5000), at: 0)
        try h.write([2, 2, 2], at: 4094)  // across a chunk boundary
        try h.append([3, 3])
        try h.write([4], at: 10_000)  // a hole of zeros
        XCTAssertEqual(try h.size, 10_001)
        var model = [UInt8](repeating: 1, count: 5000)
        model[4094...4096] = [2, 2, 2]
        model += [3, 3]
        model += [UInt8](repeating: 0, count: 10_000 - model.count) + [4]
        XCTAssertEqual(try h.read(at: 0, count: 20_000), model)
        try h.truncate(to: 4096)
        XCTAssertEqual(try h.read(at: 0, count: 99_999), Array(model[0..<4096]))
        try h.truncate(to: 4100)
        XCTAssertEqual(try h.read(at: 4090, count: 100), Array(model[4090..<4096]) + [0, 0, 0, 0])
        try h.sync()
        h.close()
        assertProtectionError([.badHandle]) { _ = try h.read(at: 0, count: 1) }
        XCTAssertEqual(try files.read(path), Array(model[0..<4096]) + [0, 0, 0, 0])
        // Read-only handles refuse writes.
        let ro = try files.open(path)
        assertProtectionError([.badHandle]) { try ro.write([1], at: 0) }
        ro.close()
        // Creating over an existing file refuses.
        assertProtectionError([.alreadyExists]) { _ = try files.create(path, protection: .none) }
    }

    /// Thousands of random operations compared, step by step, with a plain in-memory model.
    func testModelRandomOperations() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: .init(chunkSize: 4096))
        let path = "\(dir)/model"
        var h = try files.create(path, protection: .complete)
        var model = [UInt8]()
        var rng = TestRNG(seed: 42)
        let steps = 3000
        for step in 0..<steps {
            let op = Int.random(in: 0..<100, using: &rng)
            let limit = 40_000
            switch op {
            case 0..<35:
                let off = Int.random(in: 0...min(limit, model.count + 5000), using: &rng)
                let data = rng.bytes(Int.random(in: 1...9000, using: &rng))
                try h.write(data, at: Int64(off))
                if off > model.count { model += [UInt8](repeating: 0, count: off - model.count) }
                let end = off + data.count
                if end > model.count { model += [UInt8](repeating: 0, count: end - model.count) }
                model.replaceSubrange(off..<end, with: data)
            case 35..<45:
                let data = rng.bytes(Int.random(in: 1...5000, using: &rng))
                try h.append(data)
                model += data
            case 45..<55:
                let n = Int.random(in: 0...min(limit, model.count + 6000), using: &rng)
                try h.truncate(to: Int64(n))
                if n < model.count { model.removeSubrange(n...) } else { model += [UInt8](repeating: 0, count: n - model.count) }
            case 55..<58:
                h.close()
                h = try files.open(path, forWriting: true)
            default:
                let off = Int.random(in: 0...(model.count + 100), using: &rng)
                let n = Int.random(in: 0...10_000, using: &rng)
                let got = try h.read(at: Int64(off), count: n)
                let expect = off >= model.count ? [] : Array(model[off..<min(model.count, off + n)])
                XCTAssertEqual(got, expect, "step \(step): read at \(off) count \(n)")
                if got != expect { return }
            }
            XCTAssertEqual(try h.size, Int64(model.count), "step \(step)")
        }
        h.close()
        XCTAssertEqual(try files.read(path), model)
        print("model test: \(steps) random operations matched the in-memory model")
    }
}

/// The real system calls, counting `fsync`s.
final class FsyncCountingIO: ForwardingIO {
    let real = SystemFileIO()
    let fsyncs = Atomic<Int>(0)
    func fsync(_ fd: Int32) throws(SystemError) { fsyncs.add(1, ordering: .relaxed); try real.fsync(fd) }
}

/// The real system calls, counting `pread`s.
final class ReadCountingIO: ForwardingIO {
    let real = SystemFileIO()
    let reads = Atomic<Int>(0)
    func pread(_ fd: Int32, into b: UnsafeMutableRawBufferPointer, at o: Int64) throws(SystemError) -> Int {
        reads.add(1, ordering: .relaxed)
        return try real.pread(fd, into: b, at: o)
    }
}
