// The long-lived threads on which blocking work runs for async callers: kernel lock waits, and protected-file I/O.
import Dispatch
import Foundation
import Locking

/// Long-lived threads that run blocking calls off Swift's cooperative pool, so an `async` caller suspends instead of
/// holding one of its few threads, and starting a job costs a wake-up, not a thread creation.
///
/// Two pools, one mechanism:
/// - `lockWaits` grows a thread whenever every thread is busy: a kernel lock wait may last until another process
///   lets go (up to a coordinator's timeout), and 200 waiters must never queue behind each other.
/// - `io` has a fixed number of threads (`ioThreads`): protected-file reads, writes, opens and fsyncs take
///   microseconds to milliseconds, and a burst of 1,000 async writes should queue, not start 1,000 threads.
///
/// Our own rather than swift-nio's `NIOThreadPool`: the same queue-and-threads design in a hundred lines, without
/// making swift-nio a dependency of every module that reaches protected files; and it cancels a queued job (the
/// caller's task was cancelled before the job started) without running it.
package final class BlockingThreads: Sendable {
    /// The pool for kernel lock waits (grows as needed).
    package static let lockWaits = BlockingThreads(name: "FileCoordination.LockWait", limit: nil)
    /// The pool for protected-file I/O of the `async` forms (fixed size).
    package static let io = BlockingThreads(name: "DataProtection.IO", limit: ioThreads)
    /// How many threads `io` runs: twice the processors, at least 4 (a thread blocked in fsync leaves others for reads).
    package static let ioThreads = max(4, 2 * ProcessInfo.processInfo.activeProcessorCount)

    private struct Job {
        let id: UInt64
        let run: @Sendable () -> Void
        /// Resumes the caller when the job is taken off the queue unstarted (its task was cancelled).
        let cancel: @Sendable () -> Void
    }

    private struct State {
        var jobs: [Job] = []
        var idle = 0
        var threads = 0
        var nextID: UInt64 = 0
    }

    private let name: String
    private let limit: Int?
    private let state = Locked(State())
    private let work = DispatchSemaphore(value: 0)

    private init(name: String, limit: Int?) {
        self.name = name
        self.limit = limit
    }

    /// Runs `job` on an idle thread, starting a new one when all are busy and the pool may grow.
    package func run(_ job: @escaping @Sendable () -> Void) {
        _ = enqueue(job, cancel: {})
    }

    /// Runs `body` on one of the pool's threads and returns its result; the caller suspends meanwhile.
    ///
    /// Cancellation: if the caller's task is cancelled before `body` starts, `body` never runs and this throws
    /// `CancellationError`; once it has started, it runs to its end (a protected write completes or rolls back
    /// inside it; it is never cut off half way).
    /// - Throws: what `body` throws, or `CancellationError`.
    package func perform<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
        let slot = Locked<UInt64?>(nil)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<R, Error>) in
                // The check and the enqueue under one lock that the cancellation handler also takes: a cancellation
                // either came first (seen here) or finds the job queued (and removes it) or already started.
                let queued = slot.withLock { id -> Bool in
                    if Task.isCancelled { return false }
                    id = enqueue({ continuation.resume(with: Result { try body() }) }, cancel: { continuation.resume(throwing: CancellationError()) })
                    return true
                }
                if !queued { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            slot.withLock { id in if let queued = id { remove(queued)?.cancel() } }
        }
    }

    /// Queues `job` and wakes (or starts) a thread; returns the job's id.
    private func enqueue(_ job: @escaping @Sendable () -> Void, cancel: @escaping @Sendable () -> Void) -> UInt64 {
        let (id, spawn) = state.withLock { state -> (UInt64, Bool) in
            state.nextID += 1
            state.jobs.append(Job(id: state.nextID, run: job, cancel: cancel))
            if state.idle > 0 {
                state.idle -= 1
                return (state.nextID, false)
            }
            if let limit, state.threads >= limit { return (state.nextID, false) }
            state.threads += 1
            return (state.nextID, true)
        }
        if spawn {
            let thread = Thread { [self] in loop() }
            thread.name = name
            thread.start()
        } else {
            work.signal()
        }
        return id
    }

    /// Takes the job `id` off the queue if no thread has started it.
    private func remove(_ id: UInt64) -> Job? {
        state.withLock { state in
            guard let i = state.jobs.firstIndex(where: { $0.id == id }) else { return nil }
            return state.jobs.remove(at: i)
        }
    }

    private func loop() {
        while true {
            let job = state.withLock { state -> Job? in
                state.jobs.isEmpty ? nil : state.jobs.removeFirst()
            }
            if let job {
                job.run()
                continue
            }
            let parked = state.withLock { state -> Bool in
                guard state.jobs.isEmpty else { return false }
                state.idle += 1
                return true
            }
            if parked { work.wait() }
        }
    }
}
