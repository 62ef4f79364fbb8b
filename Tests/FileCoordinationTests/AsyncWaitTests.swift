// Many async coordinations waiting at once: they suspend, so other work on the cooperative pool goes on.
import FileCoordination
import Foundation
import Synchronization
import XCTest

/// A counter tasks share.
private final class Count: Sendable {
    private let value = Atomic<Int>(0)
    func add() { value.add(1, ordering: .relaxed) }
    var now: Int { value.load(ordering: .relaxed) }
}

final class AsyncWaitTests: XCTestCase {
    /// 200 tasks wait for an item another thread holds; a counter task on the same cooperative pool keeps ticking,
    /// and short jobs started meanwhile finish. Then half of a second wave is cancelled while waiting: those throw
    /// `.cancelled` and never run their accessor; the rest run once the holder lets go.
    func testTwoHundredWaitersLeaveTheCooperativePoolFree() async throws {
        let root = try makeScratchDirectory(name)
        let domain = try CoordinationDomain(root: root)
        let item = root.appendingPathComponent("item")
        let coordinator = FileCoordinator(domain: domain, timeout: .seconds(60))

        for wave in 0..<2 {
            let holder = FileCoordinator(domain: domain)
            let held = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                try? holder.coordinate(writingItemAt: item) { _ in
                    held.signal()
                    _ = release.wait(timeout: .now() + 60)
                }
            }
            held.wait()
            let ran = Count()
            let waiters = (0..<200).map { _ in
                Task {
                    try await coordinator.coordinate(with: [.readingIntent(with: item)]) { _ in ran.add() }
                }
            }
            // The counter: each tick is one hop through the cooperative pool (a 1 ms sleep, then resumption).
            let ticks = Count()
            let window = ContinuousClock.now.advanced(by: .milliseconds(500))
            let counter = Task {
                while ContinuousClock.now < window {
                    try await Task.sleep(for: .milliseconds(1))
                    ticks.add()
                }
            }
            // Other async work: 2 × the processors' worth of short jobs, each needing a pool thread to itself.
            let jobs = ProcessInfo.processInfo.activeProcessorCount * 2
            let finished = try await withThrowingTaskGroup(of: Int.self) { group in
                for j in 0..<jobs { group.addTask { (0..<100_000).reduce(j, &+) } }
                var n = 0
                for try await _ in group { n += 1 }
                return n
            }
            try await counter.value
            XCTAssertEqual(ran.now, 0, "a waiter ran while the item was held")
            XCTAssertEqual(finished, jobs)
            // A blocked pool (2 threads here) would tick never; a free one ticks hundreds of times in 500 ms (25: room for a
            // loaded machine or a sanitizer).
            XCTAssertGreaterThan(ticks.now, 25, "the cooperative pool stalled while 200 tasks waited")

            let cancelled = wave == 1 ? Array(waiters.indices.filter { $0 % 2 == 0 }) : []
            for i in cancelled { waiters[i].cancel() }
            var cancelledErrors = 0
            for i in cancelled {
                do { try await waiters[i].value } catch let e as CoordinationError where e.code == .cancelled { cancelledErrors += 1 }
            }
            release.signal()
            var completed = 0
            for (i, w) in waiters.enumerated() where !cancelled.contains(i) {
                try await w.value
                completed += 1
            }
            XCTAssertEqual(cancelledErrors, cancelled.count)
            XCTAssertEqual(ran.now, 200 - cancelled.count, "every waiter not cancelled ran once, no cancelled one ran")
            print("coordination wave \(wave): 200 tasks waiting on a held item; the counter ticked \(ticks.now) times in 500 ms, "
                + "\(finished) other jobs finished; \(cancelled.count) cancelled while waiting (all threw .cancelled), \(completed) ran after the release")
        }
    }

    /// The control: the same 200 waits through the blocking form, called from tasks, take every cooperative thread,
    /// so the counter does not tick until the holder lets go by itself (after 500 ms): the measure above can fail.
    func testBlockingWaitsInTasksStallTheCounterControl() async throws {
        let root = try makeScratchDirectory(name)
        let domain = try CoordinationDomain(root: root)
        let item = root.appendingPathComponent("item")
        let coordinator = FileCoordinator(domain: domain, timeout: .seconds(60))
        let held = DispatchSemaphore(value: 0)
        let start = ContinuousClock.now
        Thread.detachNewThread {
            try? FileCoordinator(domain: domain).coordinate(writingItemAt: item) { _ in
                held.signal()
                Thread.sleep(forTimeInterval: 0.5)  // the holder lets go on its own: no task can tell it to
            }
        }
        held.wait()
        let window = start.advanced(by: .milliseconds(400))
        let ticks = Count()
        let counter = Task {
            while ContinuousClock.now < window {
                try await Task.sleep(for: .milliseconds(1))
                if ContinuousClock.now < window { ticks.add() }
            }
        }
        let blocking = (0..<200).map { _ in Task { try coordinator.coordinate(readingItemAt: item) { _ in } } }
        for b in blocking { try await b.value }
        try await counter.value
        XCTAssertLessThan(ticks.now, 25, "blocking waits left the pool free: the async test above proves nothing here")
        print("control: 200 blocking waits in tasks; the counter ticked \(ticks.now) times in the first 400 ms")
    }
}
