import Foundation
@_spi(Testing) import DataProtection  // the testing SPI: the file-system seam
// @testable: sets the internal streaming batch size and replaces through the internal replace to reach batch boundaries.
@testable import DataProtectionFiles
import ProtectionCrypto
import SystemLayer
import XCTest

/// `write(contentsOf:)`: a regular-file input is read in place by the threads that seal it; any other input
/// (a pipe) in batches. Both must give back exactly the bytes readable from the descriptor.
/// `read(_:into:)`, the way back: every byte, once, in order.
final class StreamedWriteTests: XCTestCase {
    let chunk = 4096

    /// Every size around chunk and batch edges, from the start of the input and from a position inside it
    /// (what is readable from a descriptor starts at its position); the position ends at the end of the input.
    func testRegularFileInputFromAnyPosition() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: .init(chunkSize: chunk))
        var rng = TestRNG(seed: 7)
        let batch = ProtectedFileHandle.batchChunks(ProtectedFileHandle.streamingBatchBytes, chunkSize: chunk) * chunk
        for n in [0, 1, chunk - 1, chunk, chunk + 1, batch - 1, batch, batch + 1, 3 * batch + 17] {
            let input = rng.bytes(n)
            try writeBytes(input, "\(dir)/in")
            for position in [0, min(n, 1000)] {
                let fd = open("\(dir)/in", O_RDONLY)
                defer { close(fd) }
                XCTAssertEqual(lseek(fd, off_t(position), SEEK_SET), off_t(position))
                try files.write(contentsOf: FileDescriptor(rawValue: fd), to: "\(dir)/out", protection: .complete, durable: false)
                XCTAssertEqual(try files.read("\(dir)/out"), Array(input[position...]), "size \(n) from \(position)")
                XCTAssertEqual(lseek(fd, 0, SEEK_CUR), off_t(n), "the input is consumed")
            }
        }
    }

    /// A pipe cannot be read in place: it goes through the batch loop, fed by another thread in odd-sized writes.
    func testPipeInput() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: .init(chunkSize: chunk))
        var rng = TestRNG(seed: 8)
        let input = rng.bytes(2 * ProtectedFileHandle.batchChunks(ProtectedFileHandle.streamingBatchBytes, chunkSize: chunk) * chunk + 12_345)
        var ends: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&ends), 0)
        let writeEnd = ends[1]
        let feeder = Thread {
            var at = 0
            while at < input.count {
                let n = min(input.count - at, 7919)
                let w = input[at..<(at + n)].withUnsafeBytes { write(writeEnd, $0.baseAddress, n) }
                guard w > 0 else { break }
                at += w
            }
            close(writeEnd)
        }
        feeder.start()
        defer { close(ends[0]) }
        try files.write(contentsOf: FileDescriptor(rawValue: ends[0]), to: "\(dir)/out", protection: .complete, durable: false)
        XCTAssertEqual(try files.read("\(dir)/out"), input)
    }

    /// Simulates an input file that shrinks between the size check and the read (another process truncating
    /// it): asking the handle for more bytes than the file holds must fail with a typed error naming the file,
    /// and the atomic replace must leave the old destination and no temporary file.
    func testInputThatEndsEarlyFailsAndKeepsTheOldFile() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: .init(chunkSize: chunk))
        try files.write([1, 2, 3], to: "\(dir)/out", protection: .complete)
        try writeBytes([UInt8](repeating: 9, count: 10 * chunk), "\(dir)/in")
        let fd = open("\(dir)/in", O_RDONLY)
        defer { close(fd) }
        do {
            try files.replace("\(dir)/out", protection: .complete, via: .filesWriteStream) { (h) throws(ProtectionError) in
                try h.write(fromFile: fd, at: 0, count: 40 * chunk, to: 0)
            }
            XCTFail("a short input must not be accepted")
        } catch {
            XCTAssertEqual(error.code, .io(EIO))
            XCTAssertTrue(error.message.contains("\(dir)/out") && error.message.contains("shorter"), error.message)
        }
        XCTAssertEqual(try files.read("\(dir)/out"), [1, 2, 3])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir).sorted(), ["in", "out"])
    }

    /// `read(_:into:)` sizes its two output buffers to the file when it is smaller than a batch: every size around
    /// chunk and batch edges comes back whole, into a regular file and through a pipe that fills up.
    func testStreamedReadGivesBackEveryByte() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: .init(chunkSize: chunk))
        var rng = TestRNG(seed: 9)
        let batch = ProtectedFileHandle.batchChunks(ProtectedFileHandle.streamingBatchBytes, chunkSize: chunk) * chunk
        for n in [0, 1, chunk - 1, chunk + 1, batch - 1, batch, batch + 1, 2 * batch + 17] {
            let input = rng.bytes(n)
            try files.write(input, to: "\(dir)/p", protection: .complete)
            let fd = open("\(dir)/back", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            XCTAssertGreaterThanOrEqual(fd, 0)
            try files.read("\(dir)/p", into: FileDescriptor(rawValue: fd))
            close(fd)
            XCTAssertEqual(try readBytes("\(dir)/back"), input, "size \(n) into a file")
        }
        let input = rng.bytes(batch + 3 * chunk + 5)
        try files.write(input, to: "\(dir)/p", protection: .complete)
        var ends: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&ends), 0)
        let readEnd = ends[0]
        nonisolated(unsafe) var drained: [UInt8] = []
        let done = DispatchSemaphore(value: 0)
        let drainer = Thread {  // reads in odd-sized pieces: the writer blocks on a full pipe again and again
            var b = [UInt8](repeating: 0, count: 5003)
            while case let n = b.withUnsafeMutableBytes({ read(readEnd, $0.baseAddress, $0.count) }), n > 0 { drained += b[..<n] }
            close(readEnd)
            done.signal()
        }
        drainer.start()
        try files.read("\(dir)/p", into: FileDescriptor(rawValue: ends[1]))
        close(ends[1])
        done.wait()
        XCTAssertEqual(drained, input, "through a pipe")
    }

    /// The output descriptor fails: simulates a slow destination (200 ms a write) that fills up (`ENOSPC`) at the second
    /// write of a stream, while the reader has the next batch ready. The read fails with the write's error, and the
    /// output holds exactly the batch written before the failure: no batch after it is written (which would leave a gap).
    func testAFailedOutputWriteStopsTheStream() throws {
        final class FillingUpIO: ForwardingIO, @unchecked Sendable {  // the stream's writes run one at a time, on its writer queue
            let output: Int32
            var writes = 0
            init(output: Int32) { self.output = output }
            func write(_ fd: Int32, from buffer: UnsafeRawBufferPointer) throws(SystemError) -> Int {
                guard fd == output else { return try SystemFileIO().write(fd, from: buffer) }
                writes += 1
                if writes <= 2 { usleep(200_000) }  // the reader has the next batch ready meanwhile
                if writes == 2 { throw SystemError(ENOSPC) }
                return try SystemFileIO().write(fd, from: buffer)
            }
        }
        let dir = try temporaryDirectory(self)
        let keys = try InMemoryClassKeys.random()
        let batch = ProtectedFileHandle.batchChunks(ProtectedFileHandle.streamingBatchBytes, chunkSize: chunk) * chunk
        var rng = TestRNG(seed: 10)
        let input = rng.bytes(3 * batch)
        try ProtectedFiles(keys: keys, options: .init(chunkSize: chunk)).write(input, to: "\(dir)/p", protection: .complete)
        let fd = open("\(dir)/back", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        let io = FillingUpIO(output: fd)
        let files = ProtectedFiles(keys: keys, options: .init(chunkSize: chunk), io: io)
        XCTAssertThrowsError(try files.read("\(dir)/p", into: FileDescriptor(rawValue: fd))) { e in
            guard let e = e as? ProtectionError else { return XCTFail("\(e)") }
            XCTAssertEqual(e.code, .io(ENOSPC), e.message)
            XCTAssertTrue(e.message.contains("write the output of") && e.message.contains("free some space"), e.message)
        }
        XCTAssertEqual(io.writes, 2, "no write after the failed one")
        let back = try readBytes("\(dir)/back")
        XCTAssertEqual(back.count, batch, "the first batch, and nothing after it")
        XCTAssertTrue(back == Array(input[..<batch]), "the first batch's bytes")
    }
}
