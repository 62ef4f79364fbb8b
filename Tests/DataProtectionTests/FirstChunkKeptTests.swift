import Foundation
@_spi(Testing) import DataProtection  // the testing SPI: the file-system seam, test hooks
// @testable: reads the handle's kept chunk 0 (`State.firstChunk`) to show that a lock wipes it.
@testable import DataProtectionFiles
import XCTest

/// A handle that keeps chunk 0 between reads (a database's main file, `keepFirstChunkBetweenReads`) opens it again
/// only when its bytes on disk changed: it still returns another writer's new bytes, still fails on tampered bytes
/// (after it kept good ones), and a lock wipes the kept plaintext with the rest of the handle's staged memory.
final class FirstChunkKeptTests: XCTestCase {
    private let options = ProtectedFileOptions(chunkSize: 4096)

    private func read(_ h: ProtectedFileHandle, _ range: Range<Int>) throws -> [UInt8] {
        try h.read(at: Int64(range.lowerBound), count: range.count)
    }

    func testAKeptChunkZeroFollowsOtherWritersAndStillFailsWhenTampered() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: options)
        let path = dir + "/db"
        var rng = TestRNG(seed: 11)
        var bytes = rng.bytes(3 * 4096 + 500)
        try files.write(bytes, to: path, protection: .complete)
        let reader = try files.open(path, forWriting: false)
        defer { reader.close() }
        reader.keepFirstChunkBetweenReads()

        XCTAssertEqual(try read(reader, 24..<40), Array(bytes[24..<40]))
        XCTAssertEqual(try read(reader, 0..<4096), Array(bytes[0..<4096]), "served again from the kept chunk")

        // Another handle re-seals chunk 0: the reader sees the new bytes, not its kept ones.
        let writer = try files.open(path, forWriting: true)
        try writer.write([9, 9, 9, 9], at: 30)
        try writer.sync()
        writer.close()
        bytes.replaceSubrange(30..<34, with: [9, 9, 9, 9])
        XCTAssertEqual(try read(reader, 24..<40), Array(bytes[24..<40]))

        // Flipped ciphertext of chunk 0 (header 176 bytes, then the chunk's 24-byte nonce): the kept plaintext is not
        // returned; the read fails as any read of a tampered chunk.
        let fd = open(path, O_RDWR)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        var byte: UInt8 = 0
        XCTAssertEqual(pread(fd, &byte, 1, 176 + 24 + 100), 1)
        var flipped = byte ^ 0x01
        XCTAssertEqual(pwrite(fd, &flipped, 1, 176 + 24 + 100), 1)
        XCTAssertThrowsError(try read(reader, 24..<40)) { XCTAssertEqual(($0 as? ProtectionError)?.code, .authenticationFailed) }
        XCTAssertThrowsError(try read(reader, 24..<40), "still refused the second time") {
            XCTAssertEqual(($0 as? ProtectionError)?.code, .authenticationFailed)
        }
        XCTAssertEqual(pwrite(fd, &byte, 1, 176 + 24 + 100), 1)
        XCTAssertEqual(try read(reader, 0..<4096), Array(bytes[0..<4096]), "the restored bytes open again")
        XCTAssertEqual(try read(reader, 4000..<4200), Array(bytes[4000..<4200]), "reads past chunk 0 take the usual path")
    }

    func testALockWipesTheKeptChunkZero() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: options)
        let path = dir + "/db"
        let bytes = [UInt8](repeating: 0x5A, count: 2 * 4096)
        try files.write(bytes, to: path, protection: .complete)
        let h = try files.open(path, forWriting: false)
        defer { h.close() }
        h.keepFirstChunkBetweenReads()
        XCTAssertEqual(try read(h, 0..<16), Array(bytes[0..<16]))
        let keptBefore = h.state.withLock { st in st.firstChunk.map { Array($0[4096 + 40..<2 * (4096 + 40)]) } ?? [] }
        XCTAssertTrue(keptBefore.prefix(4096).allSatisfy { $0 == 0x5A }, "chunk 0's plaintext is kept")

        h.revoke { _ in true }  // what a lock does to every open handle of a locked class
        let keptAfter = h.state.withLock { st in st.firstChunk.map { Array($0) } ?? [] }
        XCTAssertFalse(keptAfter.isEmpty)
        XCTAssertTrue(keptAfter.allSatisfy { $0 == 0 }, "the kept chunk 0 is wiped by the lock")
        // These in-memory keys never lock, so the next read takes keys again (as after an unlock) and opens chunk 0 anew.
        XCTAssertEqual(try read(h, 0..<16), Array(bytes[0..<16]))
    }
}
