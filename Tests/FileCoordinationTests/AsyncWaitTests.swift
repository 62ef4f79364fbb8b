// Many async coordinations waiting at once: they suspend, so other work on the cooperative pool goes on.
import FileCoordination
import Foundation
import TestSupport
import XCTest

final class AsyncWaitTests: XCTestCase {
    /// 200 tasks wait for an item another thread holds; a probe on the same cooperative pool keeps hopping,
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
            let ran = TaskCounter()
            let waiters = (0..<200).map { _ in
                Task {
                    try await coordinator.coordinate(with: [.readingIntent(with: item)]) { _ in ran.add() }
                }
            }
            // The probe hops through the pool while 2 × the processors' worth of short jobs, each needing a pool
            // thread to itself, run beside it: both finish only if the waiters left the pool's threads free.
            async let probe = CooperativePoolProbe.hops()
            let jobs = ProcessInfo.processInfo.activeProcessorCount * 2
            let finished = try await withThrowingTaskGroup(of: Int.self) { group in
                for j in 0..<jobs { group.addTask { (0..<100_000).reduce(j, &+) } }
                var n = 0
                for try await _ in group { n += 1 }
                return n
            }
            let (hops, took) = try await probe
            XCTAssertEqual(ran.now, 0, "a waiter ran while the item was held")
            XCTAssertEqual(finished, jobs)
            // A blocked pool (2 threads here) hops never while the item is held, and the holder holds until released below.
            XCTAssertEqual(hops, 50, "the cooperative pool stalled while 200 tasks waited")

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
            print("coordination wave \(wave): 200 tasks waiting on a held item; the pool made \(hops) hops in \(took), "
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
        let probe = CooperativePoolProbe(until: window)
        let blocking = (0..<200).map { _ in Task { try coordinator.coordinate(readingItemAt: item) { _ in } } }
        for b in blocking { try await b.value }
        let ticks = try await probe.ticks()
        XCTAssertLessThan(ticks, 25, "blocking waits left the pool free: the async test above proves nothing here")
        print("control: 200 blocking waits in tasks; the counter ticked \(ticks) times in the first 400 ms")
    }
}
