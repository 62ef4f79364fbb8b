import FileCoordination
import Foundation
@_spi(Testing) import DataProtection  // the testing SPI: the entry points' record
import Synchronization
import TestSupport
import XCTest

/// The async (`nonblocking`) forms: the same entry points as the synchronous calls, run off the cooperative pool,
/// cancellable before they start, never torn once started.
final class NonblockingFilesTests: XCTestCase {
    /// Each async form reaches its synchronous form's entry point, so the guarantee matrix's cells cover it.
    func testAsyncFormsGoThroughTheSynchronousEntryPoints() async throws {
        let dir = try temporaryDirectory(self)
        let keys = try InMemoryClassKeys.random()
        let files = ProtectedFiles(keys: keys)
        func observed(_ body: () async throws -> Void) async rethrows -> Set<ProtectedDataEntryPoint> {
            ProtectedDataEntryPoint.resetObserved()
            try await body()
            return ProtectedDataEntryPoint.observed
        }
        let path = "\(dir)/a"
        var seen = try await observed { try await files.nonblocking.write([1, 2, 3], to: path, protection: .complete) }
        XCTAssertEqual(seen, [.filesWrite])
        var bytes: [UInt8] = []
        seen = try await observed { bytes = try await files.nonblocking.read(path) }
        XCTAssertEqual(seen, [.filesRead])
        XCTAssertEqual(bytes, [1, 2, 3])
        seen = try await observed { await (try await files.nonblocking.open(path)).nonblocking.close() }
        XCTAssertEqual(seen, [.filesOpen])
        seen = try await observed {
            let h = try await files.nonblocking.open(path, forWriting: true)
            try await h.nonblocking.append([4])
            try await h.nonblocking.sync()
            bytes = try await h.nonblocking.read(at: 0, count: 4)
            await h.nonblocking.close()
        }
        XCTAssertEqual(seen, [.filesOpenForWriting])
        XCTAssertEqual(bytes, [1, 2, 3, 4])
        seen = try await observed { await (try await files.nonblocking.create("\(dir)/b", protection: .complete)).nonblocking.close() }
        XCTAssertEqual(seen, [.filesCreate])

        let container = try Container.create(at: "\(dir)/c", keys: keys)
        defer { container.close() }
        seen = try await observed { try await container.nonblocking.write([5], to: "Documents/x") }
        XCTAssertEqual(seen, [.containerWrite])
        seen = try await observed { bytes = try await container.nonblocking.read("Documents/x") }
        XCTAssertEqual(seen, [.containerRead])
        XCTAssertEqual(bytes, [5])
        seen = try await observed { await (try await container.nonblocking.open("Documents/x")).nonblocking.close() }
        XCTAssertEqual(seen, [.containerOpen])
        seen = try await observed { await (try await container.nonblocking.create("Documents/y")).nonblocking.close() }
        XCTAssertEqual(seen, [.containerCreate])
    }

    /// 200 async whole-file writes of a file another coordinator holds: the cooperative pool keeps running (a probe
    /// keeps hopping), cancelling them all cancels those still queued (they do nothing), and those already started finish
    /// whole once the holder lets go: the file then holds exactly one of the writes, never a mix.
    func testTwoHundredCoordinatedWritesWaitOffThePoolAndCancelCleanly() async throws {
        let dir = try temporaryDirectory(self)
        let coordination = try CoordinationDomain(root: URL(fileURLWithPath: dir))
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), coordinator: FileCoordinator(domain: coordination))
        let path = "\(dir)/doc"
        try files.write(Array(repeating: 0, count: 10_000), to: path, protection: .complete)
        let holder = FileCoordinator(domain: coordination)
        let held = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? holder.coordinate(writingItemAt: URL(fileURLWithPath: path), options: .forReplacing) { _ in
                held.signal()
                _ = release.wait(timeout: .now() + 60)
            }
        }
        held.wait()
        let writers = (1...200).map { i in
            Task { try await files.nonblocking.write(Array(repeating: UInt8(i), count: 10_000), to: path, protection: .complete) }
        }
        let (hops, took) = try await CooperativePoolProbe.hops()
        // A blocked pool (2 threads here) hops never while the file is held, and the holder holds until released below.
        XCTAssertEqual(hops, 50, "the cooperative pool stalled while 200 writes waited")
        for w in writers { w.cancel() }
        release.signal()
        var cancelled = 0, written = 0
        for w in writers {
            do { try await w.value; written += 1 } catch is CancellationError { cancelled += 1 }
        }
        XCTAssertEqual(cancelled + written, 200)
        XCTAssertGreaterThan(cancelled, 0, "no queued write was cancelled")
        XCTAssertGreaterThan(written, 0, "the writes already started did not finish")
        let final = try files.read(path)
        XCTAssertEqual(final.count, 10_000)
        XCTAssertEqual(Set(final).count, 1, "the file mixes two writes")
        XCTAssertNotEqual(final.first, 0, "no started write reached the file")
        print("200 coordinated async writes while held: the pool made \(hops) hops in \(took); "
            + "after cancel, \(cancelled) never started, \(written) finished whole")
    }
}
