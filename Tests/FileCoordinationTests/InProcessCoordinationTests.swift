// Threads of one process: sharing, exclusion, nesting, timeouts, cancellation, options and bad input.
import FileCoordination
import Foundation
import Synchronization
import XCTest

final class InProcessCoordinationTests: XCTestCase {
    private var root: URL!
    private var domain: CoordinationDomain!

    override func setUpWithError() throws {
        root = try makeScratchDirectory(name)
        domain = try CoordinationDomain(root: root)
    }

    private func url(_ relative: String) -> URL { root.appendingPathComponent(relative) }

    /// Runs `body` on a new thread while the item is held in `mode`; `body` runs inside the accessor.
    private func whileHeld(_ relative: String, writing: WritingOptions? = nil, _ body: () throws -> Void) throws {
        let held = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let holder = FileCoordinator(domain: domain)
        let item = url(relative)
        Thread.detachNewThread {
            let access: (URL) -> Void = { _ in
                held.signal()
                _ = release.wait(timeout: .now() + 10)
            }
            if let writing {
                try? holder.coordinate(writingItemAt: item, options: writing, byAccessor: access)
            } else {
                try? holder.coordinate(readingItemAt: item, byAccessor: access)
            }
            done.signal()
        }
        XCTAssertEqual(held.wait(timeout: .now() + 5), .success, "the holder never got the item")
        defer {
            release.signal()
            _ = done.wait(timeout: .now() + 5)
        }
        try body()
    }

    private func assertTimesOut(_ body: () throws -> Void, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try body(), file: file, line: line) { error in
            XCTAssertEqual((error as? CoordinationError)?.code, .timedOut, "\(error)", file: file, line: line)
        }
    }

    private var impatient: FileCoordinator { FileCoordinator(domain: domain, timeout: .milliseconds(100)) }

    func testReadersShareAndWritersExclude() throws {
        try whileHeld("f") {
            try impatient.coordinate(readingItemAt: url("f")) { _ in }  // shares
            assertTimesOut { try impatient.coordinate(writingItemAt: url("f")) { _ in } }
            try impatient.coordinate(writingItemAt: url("other")) { _ in }  // other items are free
        }
        try whileHeld("f", writing: []) {
            assertTimesOut { try impatient.coordinate(readingItemAt: url("f")) { _ in } }
            assertTimesOut { try impatient.coordinate(writingItemAt: url("f")) { _ in } }
        }
    }

    func testThreadsOfOneProcessExcludeEachOther() throws {
        // Four reader threads and three writer threads, each with its own coordinator, on one item:
        // every section checks the shared counters (the kernel separates the threads' open file descriptions).
        let readers = Atomic<Int>(0)
        let writers = Atomic<Int>(0)
        let violations = Atomic<Int>(0)
        let sharedReads = Atomic<Int>(0)
        let group = DispatchGroup()
        let item = url("f")
        let domain = self.domain!
        for index in 0..<7 {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                let coordinator = FileCoordinator(domain: domain, timeout: .seconds(20))
                for _ in 0..<200 {
                    if index < 4 {
                        try? coordinator.coordinate(readingItemAt: item) { _ in
                            let inside = readers.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue
                            if inside > 1 { sharedReads.add(1, ordering: .relaxed) }
                            if writers.load(ordering: .sequentiallyConsistent) != 0 { violations.add(1, ordering: .relaxed) }
                            usleep(20)
                            readers.subtract(1, ordering: .sequentiallyConsistent)
                        }
                    } else {
                        try? coordinator.coordinate(writingItemAt: item) { _ in
                            if writers.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue != 1 { violations.add(1, ordering: .relaxed) }
                            if readers.load(ordering: .sequentiallyConsistent) != 0 { violations.add(1, ordering: .relaxed) }
                            usleep(20)
                            writers.subtract(1, ordering: .sequentiallyConsistent)
                        }
                    }
                }
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success)
        XCTAssertEqual(violations.load(ordering: .relaxed), 0)
        XCTAssertGreaterThan(sharedReads.load(ordering: .relaxed), 0, "readers in different threads should share")
    }

    func testDeletingMovingReplacingADirectoryExcludesItsContents() throws {
        for option in [WritingOptions.forDeleting, .forMoving, .forReplacing] {
            try whileHeld("dir", writing: option) {
                assertTimesOut { try impatient.coordinate(readingItemAt: url("dir/sub/file")) { _ in } }
                assertTimesOut { try impatient.coordinate(writingItemAt: url("dir/file")) { _ in } }
                try impatient.coordinate(readingItemAt: url("dirt")) { _ in }
            }
        }
        // A plain write of the directory (its own metadata) leaves the contents accessible.
        try whileHeld("dir", writing: []) {
            try impatient.coordinate(readingItemAt: url("dir/file")) { _ in }
        }
        // And contents in use hold off a move of the directory.
        try whileHeld("dir/file") {
            assertTimesOut { try impatient.coordinate(writingItemAt: url("dir"), options: .forMoving) { _ in } }
        }
    }

    func testACoordinatorNeverBlocksItselfWhenNesting() throws {
        let coordinator = FileCoordinator(domain: domain, timeout: .seconds(2))
        let result = try coordinator.coordinate(writingItemAt: url("f")) { _ in
            try coordinator.coordinate(readingItemAt: url("f")) { _ in
                try coordinator.coordinate(writingItemAt: url("f")) { _ in 42 }
            }
        }
        XCTAssertEqual(result, 42)
        // Reading then writing the same item nested is an upgrade; it succeeds when nobody else reads.
        try coordinator.coordinate(readingItemAt: url("g")) { _ in
            try coordinator.coordinate(writingItemAt: url("g")) { _ in }
        }
        // Everything was released: another thread's coordinator gets the items at once.
        try impatient.coordinate(writingItemAt: url("f")) { _ in }
        try impatient.coordinate(writingItemAt: url("g")) { _ in }
    }

    func testNestedUpgradeThatWouldDeadlockFailsFast() throws {
        let coordinator = FileCoordinator(domain: domain, timeout: .seconds(10))
        try whileHeld("f") {
            let start = Date()
            try coordinator.coordinate(readingItemAt: url("f")) { _ in
                XCTAssertThrowsError(try coordinator.coordinate(writingItemAt: url("f")) { _ in }) { error in
                    XCTAssertEqual((error as? CoordinationError)?.code, .wouldDeadlock)
                }
                // The outer read is still held after the failed upgrade (checked from another thread,
                // since any coordination on this thread nests in the outer one).
                let other = impatient
                let item = url("f")
                let outcome = LockedBox<CoordinationError.Code?>(nil)
                let done = DispatchSemaphore(value: 0)
                Thread.detachNewThread {
                    do { try other.coordinate(writingItemAt: item) { _ in } } catch { outcome.set((error as? CoordinationError)?.code) }
                    done.signal()
                }
                done.wait()
                XCTAssertEqual(outcome.get(), .timedOut)
            }
            XCTAssertLessThan(Date().timeIntervalSince(start), 2, "the nested upgrade should fail at once, not wait out the timeout")
        }
    }

    func testNestedRequestAboveTheHeldLocksWaits() throws {
        // Pick two names whose slots are ordered low < high.
        let (low, high) = ["x1", "x2", "x3", "x4"].map { ($0, LockLayout.slot(forRelativePath: $0)) }.sorted { $0.1 < $1.1 }
            .map(\.0).pairedEnds()
        let coordinator = FileCoordinator(domain: domain, timeout: .seconds(5))
        let released = DispatchSemaphore(value: 0)
        try coordinator.coordinate(writingItemAt: url(low)) { _ in
            // Another thread holds `high` briefly; a nested request for it (above `low`) polls until free.
            let holder = FileCoordinator(domain: domain)
            let holding = DispatchSemaphore(value: 0)
            let highURL = url(high)
            Thread.detachNewThread {
                try? holder.coordinate(writingItemAt: highURL) { _ in
                    holding.signal()
                    usleep(50_000)  // holds the lock for a measured 50 ms
                }
                released.signal()
            }
            holding.wait()
            try coordinator.coordinate(writingItemAt: url(high)) { _ in }
        }
        XCTAssertEqual(released.wait(timeout: .now() + 5), .success)
    }

    func testWaitsTimeOutWithTheItemInTheMessage() throws {
        try whileHeld("f", writing: []) {
            let start = Date()
            XCTAssertThrowsError(try impatient.coordinate(readingItemAt: url("f")) { _ in }) { error in
                let error = error as? CoordinationError
                XCTAssertEqual(error?.code, .timedOut)
                XCTAssertTrue(error?.message.contains(url("f").path) ?? false, "\(String(describing: error))")
            }
            let elapsed = Date().timeIntervalSince(start)
            XCTAssertGreaterThanOrEqual(elapsed, 0.09)
            XCTAssertLessThan(elapsed, 1)
        }
        // The abandoned wait left nothing behind once the holder finished.
        try impatient.coordinate(writingItemAt: url("f")) { _ in }
    }

    func testCancelStopsWaitingCoordinations() throws {
        let coordinator = FileCoordinator(domain: domain, timeout: .seconds(30))
        try whileHeld("f", writing: []) {
            let finished = DispatchSemaphore(value: 0)
            let outcome = LockedBox<CoordinationError.Code?>(nil)
            let item = url("f")
            Thread.detachNewThread {
                do {
                    try coordinator.coordinate(readingItemAt: item) { _ in }
                } catch {
                    outcome.set((error as? CoordinationError)?.code)
                }
                finished.signal()
            }
            // Cancel until the waiting call has registered and ended (cancel only affects calls in flight).
            var ended = false
            for _ in 0..<500 where !ended {
                coordinator.cancel()
                ended = finished.wait(timeout: .now() + .milliseconds(10)) == .success
            }
            XCTAssertTrue(ended, "cancel() did not stop the waiting coordination")
            XCTAssertEqual(outcome.get(), .cancelled)
        }
    }

    func testAsyncFormTakesAllItemsAndHonoursTaskCancellation() async throws {
        let coordinator = FileCoordinator(domain: domain, timeout: .seconds(30))
        let urls = try await coordinator.coordinate(with: [
            .readingIntent(with: url("a")), .writingIntent(with: url("b"), options: .forReplacing),
        ]) { urls in urls }
        XCTAssertEqual(urls.map(\.lastPathComponent), ["a", "b"])

        let holder = FileCoordinator(domain: domain)
        let release = DispatchSemaphore(value: 0)
        let held = DispatchSemaphore(value: 0)
        let b = url("b")
        Thread.detachNewThread {
            try? holder.coordinate(writingItemAt: b) { _ in
                held.signal()
                _ = release.wait(timeout: .now() + 10)
            }
        }
        held.wait()
        defer { release.signal() }
        let intents: [FileAccessIntent] = [.readingIntent(with: url("a")), .writingIntent(with: b)]
        let task = Task {
            try await coordinator.coordinate(with: intents) { _ in }
        }
        try await Task.sleep(for: .milliseconds(50))  // lets the task start waiting; correctness does not depend on it
        task.cancel()
        do {
            try await task.value
            XCTFail("the cancelled coordination ran its accessor")
        } catch {
            XCTAssertEqual((error as? CoordinationError)?.code, .cancelled)
        }
        // All or nothing: the read lock on `a` taken before the wait was given back.
        try impatient.coordinate(writingItemAt: url("a")) { _ in }
    }

    func testForUploadingHandsASnapshotAndReleasesEarly() throws {
        try Data("original".utf8).write(to: url("doc"))
        let coordinator = FileCoordinator(domain: domain)
        var snapshot: URL?
        try coordinator.coordinate(readingItemAt: url("doc"), options: .forUploading) { copy in
            snapshot = copy
            XCTAssertNotEqual(copy.path, url("doc").path)
            XCTAssertEqual(try String(contentsOf: copy, encoding: .utf8), "original")
            // The lock is already released: a writer from another coordinator gets in at once.
            try impatient.coordinate(writingItemAt: url("doc")) { url in try Data("changed".utf8).write(to: url) }
            XCTAssertEqual(try String(contentsOf: copy, encoding: .utf8), "original")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: snapshot!.path), "the snapshot should be removed afterwards")
        XCTAssertThrowsError(try coordinator.coordinate(readingItemAt: url("missing"), options: .forUploading) { _ in }) { error in
            XCTAssertEqual((error as? CoordinationError)?.code, .ioFailure)
        }
    }

    func testResolvesSymbolicLinkCoordinatesTheTarget() throws {
        try Data("t".utf8).write(to: url("target"))
        try FileManager.default.createSymbolicLink(at: url("link"), withDestinationURL: url("target"))
        let coordinator = FileCoordinator(domain: domain)
        try coordinator.coordinate(readingItemAt: url("link"), options: .resolvesSymbolicLink) { resolved in
            XCTAssertEqual(resolved.lastPathComponent, "target")
        }
        try whileHeld("target", writing: []) {
            assertTimesOut { try impatient.coordinate(readingItemAt: url("link"), options: .resolvesSymbolicLink) { _ in } }
            try impatient.coordinate(readingItemAt: url("link")) { _ in }  // the link itself is another item
        }
    }

    func testBadInputThrowsTypedErrors() throws {
        let coordinator = FileCoordinator(domain: domain)
        let cases: [(URL, CoordinationError.Code)] = [
            (URL(fileURLWithPath: "/somewhere/else"), .outsideDomain),
            (URL(string: "https://example.com/x")!, .invalidRequest),
        ]
        for (item, code) in cases {
            XCTAssertThrowsError(try coordinator.coordinate(readingItemAt: item) { _ in }) { error in
                XCTAssertEqual((error as? CoordinationError)?.code, code)
            }
        }
        XCTAssertThrowsError(try coordinator.item(at: url("a"), didMoveTo: url("b"))) { error in
            XCTAssertEqual((error as? CoordinationError)?.code, .invalidRequest)
        }
        try coordinator.coordinate(readingItemAt: url("a")) { _ in
            XCTAssertThrowsError(try coordinator.item(at: url("a"), didMoveTo: url("b")), "a read cannot report a move")
        }
        XCTAssertThrowsError(try CoordinationDomain(root: URL(string: "https://example.com")!)) { error in
            XCTAssertEqual((error as? CoordinationError)?.code, .invalidRequest)
        }
        XCTAssertThrowsError(try CoordinationDomain(root: url("no-such-directory"))) { error in
            XCTAssertEqual((error as? CoordinationError)?.code, .invalidRequest)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: url("no-such-directory").path), "a failed open must not create the root")
        XCTAssertThrowsError(try CoordinationDomain(root: root, lockDirectory: URL(fileURLWithPath: "/proc/forbidden"))) { error in
            XCTAssertEqual((error as? CoordinationError)?.code, .lockDirectoryUnavailable)
        }
    }

    func testUnstructuredTaskOutlivingTheAccessorIsNotNested() async throws {
        let coordinator = FileCoordinator(domain: domain, timeout: .milliseconds(100))
        let item = url("f")
        let accessorEnded = DispatchSemaphore(value: 0)
        let attempted = DispatchSemaphore(value: 0)
        // A Task created inside the accessor inherits its task-locals but runs after it ended; it
        // must wait like any outermost request (here: time out behind another holder), not act
        // as nested in a finished coordination (which would fail with .wouldDeadlock).
        let late = try coordinator.coordinate(readingItemAt: item) { _ in
            Task { () -> CoordinationError.Code? in
                accessorEnded.wait()
                defer { attempted.signal() }
                do {
                    try coordinator.coordinate(writingItemAt: item) { _ in }
                    return nil
                } catch {
                    return (error as? CoordinationError)?.code
                }
            }
        }
        try whileHeld("f", writing: []) {
            accessorEnded.signal()
            XCTAssertEqual(attempted.wait(timeout: .now() + 5), .success)
        }
        let code = await late.value
        XCTAssertEqual(code, .timedOut)
    }

    func testAccessorErrorsPassThroughAndReleaseTheLocks() throws {
        struct Boom: Error {}
        let coordinator = FileCoordinator(domain: domain)
        XCTAssertThrowsError(try coordinator.coordinate(writingItemAt: url("f")) { _ in throw Boom() }) { error in
            XCTAssertTrue(error is Boom)
        }
        try impatient.coordinate(writingItemAt: url("f")) { _ in }
    }
}

/// A value shared between a test and its threads.
final class LockedBox<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func set(_ newValue: Value) { lock.withLock { value = newValue } }
    func get() -> Value { lock.withLock { value } }
}

extension Array {
    /// The first and last elements.
    func pairedEnds() -> (Element, Element) { (self[0], self[count - 1]) }
}
