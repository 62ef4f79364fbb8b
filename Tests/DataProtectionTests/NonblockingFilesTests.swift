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
    /// keeps hopping), cancelling half of them while they wait makes those throw `CancellationError` and do nothing, and
    /// the others finish whole once the holder lets go: the file then holds exactly one of the writes, never a mix.
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
        for (i, w) in writers.enumerated() where i % 2 == 0 { w.cancel() }
        release.signal()
        var cancelled = 0, written = 0
        for w in writers {
            do { try await w.value; written += 1 } catch is CancellationError { cancelled += 1 }
        }
        XCTAssertEqual(cancelled, 100, "every write cancelled while it waited for coordination threw CancellationError")
        XCTAssertEqual(written, 100, "every write not cancelled finished once the holder let go")
        let final = try files.read(path)
        XCTAssertEqual(final.count, 10_000)
        XCTAssertEqual(Set(final).count, 1, "the file mixes two writes")
        XCTAssertNotEqual(final.first, 0, "no started write reached the file")
        print("200 coordinated async writes while held: the pool made \(hops) hops in \(took); "
            + "after cancel, \(cancelled) never started, \(written) finished whole")
    }

    /// 64 async coordinated writes (48 through `ProtectedFiles`, 16 through a container) wait on items another
    /// coordinator holds, more than `BlockingThreads.ioThreads` times over; meanwhile 40 async writes and reads of other
    /// files, on the same I/O threads, all complete. Once the holder lets go, every waiting write finishes whole.
    ///
    /// Against the old forms, which waited for coordination on an I/O thread, the first 4 waits filled the pool and
    /// the other I/O never ran while the items were held (this test then fails at `otherIODone`).
    func testWaitingCoordinatedWritesLeaveTheIOThreadsFree() async throws {
        let dir = try temporaryDirectory(self)
        let coordination = try CoordinationDomain(root: URL(fileURLWithPath: dir))
        let keys = try InMemoryClassKeys.random()
        let coordinated = ProtectedFiles(keys: keys, coordinator: FileCoordinator(domain: coordination, timeout: .seconds(60)))
        let plain = ProtectedFiles(keys: keys)
        let container = try Container.create(
            at: "\(dir)/c", keys: keys, options: .init(coordination: .custom(FileCoordinator(domain: coordination, timeout: .seconds(60)))))
        defer { container.close() }
        let doc = "\(dir)/doc", note = "Documents/note"
        try coordinated.write([0], to: doc, protection: .complete)
        try container.write([0], to: note)
        let holder = FileCoordinator(domain: coordination)
        let held = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? holder.coordinate(
                writingItemAt: URL(fileURLWithPath: doc), options: .forReplacing,
                writingItemAt: URL(fileURLWithPath: container.root + "/" + note), options: .forReplacing
            ) { _, _ in
                held.signal()
                _ = release.wait(timeout: .now() + 60)
            }
        }
        held.wait()
        let writers = (1...48).map { i in
            Task { try await coordinated.nonblocking.write(Array(repeating: UInt8(i), count: 4_096), to: doc, protection: .complete) }
        } + (1...16).map { i in
            Task { try await container.nonblocking.write(Array(repeating: UInt8(i), count: 4_096), to: note) }
        }
        XCTAssertGreaterThan(writers.count, BlockingThreads.ioThreads * 4)
        // The other I/O: 20 files written then read back, each call a job on the same I/O threads.
        let otherIO = Task {
            try await withThrowingTaskGroup(of: Bool.self) { group in
                for i in 0..<20 {
                    group.addTask {
                        let path = "\(dir)/other-\(i)"
                        try await plain.nonblocking.write([UInt8(i), 1, 2], to: path, protection: .complete)
                        return try await plain.nonblocking.read(path) == [UInt8(i), 1, 2]
                    }
                }
                var ok = 0
                for try await roundTrip in group where roundTrip { ok += 1 }
                return ok
            }
        }
        // Waits for the other I/O with the items still held, up to 10 s (a stalled pool never finishes it).
        let start = ContinuousClock.now
        let finished = Atomic<Bool>(false)
        let watcher = Task { _ = try await otherIO.value; finished.store(true, ordering: .releasing) }
        while !finished.load(ordering: .acquiring) && ContinuousClock.now - start < .seconds(10) {
            try await Task.sleep(for: .milliseconds(2))
        }
        let otherIODone = finished.load(ordering: .acquiring)
        let otherIOTime = ContinuousClock.now - start
        release.signal()
        _ = try await watcher.value
        let roundTrips = try await otherIO.value
        XCTAssertTrue(otherIODone, "async file I/O stalled while 64 coordinated writes waited: the waits hold the I/O threads")
        XCTAssertEqual(roundTrips, 20)
        for w in writers { try await w.value }
        let final = try coordinated.read(doc), finalNote = try container.read(note)
        XCTAssertEqual(final.count, 4_096)
        XCTAssertEqual(Set(final).count, 1, "the file mixes two writes")
        XCTAssertEqual(finalNote.count, 4_096)
        XCTAssertEqual(Set(finalNote).count, 1, "the container's file mixes two writes")
        print("64 coordinated async writes waiting on held items (\(BlockingThreads.ioThreads) I/O threads): 20 other write+read "
            + "round trips finished in \(otherIOTime) while held; after the release all 64 writes finished whole")
    }

    /// A coordinated async write that waits past the coordinator's timeout fails as the blocking form does: the same
    /// `.coordinationFailed` naming the file, with the coordinator's `.timedOut` underneath, and the file untouched.
    func testCoordinatedAsyncWriteTimesOutLikeTheBlockingForm() async throws {
        let dir = try temporaryDirectory(self)
        let coordination = try CoordinationDomain(root: URL(fileURLWithPath: dir))
        let files = ProtectedFiles(
            keys: try InMemoryClassKeys.random(), coordinator: FileCoordinator(domain: coordination, timeout: .milliseconds(200)))
        let path = "\(dir)/doc"
        try files.write([7], to: path, protection: .complete)
        let held = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? FileCoordinator(domain: coordination).coordinate(writingItemAt: URL(fileURLWithPath: path), options: .forReplacing) { _ in
                held.signal()
                _ = release.wait(timeout: .now() + 60)
            }
        }
        held.wait()
        defer { release.signal() }
        var blocking: ProtectionError?
        do { try files.write([8], to: path, protection: .complete) } catch { blocking = error }
        let start = ContinuousClock.now
        var async: ProtectionError?
        do { try await files.nonblocking.write([9], to: path, protection: .complete) } catch let e as ProtectionError { async = e }
        let waited = ContinuousClock.now - start
        XCTAssertEqual(async?.code, .coordinationFailed)
        XCTAssertEqual(async?.code, blocking?.code)
        XCTAssertEqual(async?.message, blocking?.message)
        XCTAssertEqual((async?.underlying as? CoordinationError)?.code, .timedOut)
        XCTAssertGreaterThanOrEqual(waited, .milliseconds(190))
        XCTAssertLessThan(waited, .seconds(5))
        release.signal()
        XCTAssertEqual(try files.read(path), [7], "a timed-out write changed the file")
        print("async coordinated write timed out after \(waited): \(async?.message ?? "-")")
    }
}
