// Drives a LockPlanCursor to completion: kernel waits on threads for outermost requests, polling for nested and thread-free ones.
internal import SystemLayer
internal import Glibc

/// Takes a plan's locks with a deadline and cancellation, all or nothing.
struct LockAcquirer {
    let lease: Lease
    let deadline: UInt64
    let scope: CancelScope
    let generation: UInt64
    /// The items named in errors (joined only when an error is made).
    let items: [ResolvedItem]
    /// Whether a busy lock is polled (with backoff) instead of waited for in the kernel on a waiter thread. Nested
    /// requests poll, so an abandoned wait can never poison locks the outer coordination still holds; so do waits
    /// that must hold no thread at all while they wait (`FileCoordinator.coordinate(with:on:_:)`).
    let polls: Bool

    /// How long an acquisition retries a busy lock before it starts a kernel wait (nanoseconds).
    static let spinBudget: UInt64 = 50_000

    /// Takes the locks, blocking the calling thread while waiting.
    /// - Throws: `CoordinationError` (`.timedOut`, `.cancelled`, `.wouldDeadlock`, `.lockDirectoryUnavailable`);
    ///   the cursor's locks are then not held (outermost: the caller checks the lease in).
    func acquireBlocking(_ cursor: inout LockPlanCursor) throws(CoordinationError) {
        var pacing = Pacing()
        while let busy = try nextBusyLock(&cursor) {
            switch pacing.next(polls: polls) {
            case .retry: sched_yield()
            case .poll(let nanoseconds): usleep(UInt32(nanoseconds / 1_000))
            case .kernelWait:
                let wait = try startKernelWait(busy)
                let outcome = wait.waitBlocking(deadline: deadline)
                scope.unregister(wait)
                try accept(outcome, &cursor)
            }
        }
    }

    /// Takes the locks, suspending the task (no thread of the cooperative pool blocks).
    /// - Throws: as `acquireBlocking`, and `.cancelled` when the task is cancelled.
    func acquireAsync(_ cursor: inout LockPlanCursor) async throws(CoordinationError) {
        var pacing = Pacing()
        while let busy = try nextBusyLock(&cursor) {
            if Task.isCancelled { throw cancelledError() }
            switch pacing.next(polls: polls) {
            case .retry: await Task.yield()
            case .poll(let nanoseconds): try? await Task.sleep(nanoseconds: nanoseconds)
            case .kernelWait:
                let wait = try startKernelWait(busy)
                let outcome = await wait.waitAsync(deadline: deadline)
                scope.unregister(wait)
                try accept(outcome, &cursor)
            }
        }
    }

    /// How the next attempt at a busy lock is made.
    private struct Pacing {
        enum Step {
            /// Retry at once after yielding (short holds end within microseconds).
            case retry
            /// Polling: retry after sleeping (backoff from 2 µs to 16 ms), never a kernel wait. The cap bounds the wake-ups
            /// of many long waits (200 waiting tasks make about 12,500 tries a second) at the cost of up to 16 ms after a
            /// release.
            case poll(UInt64)
            /// Wait in the kernel on a waiter thread.
            case kernelWait
        }

        private var spinUntil: UInt64 = 0
        private var backoff: UInt64 = 2_000

        mutating func next(polls: Bool) -> Step {
            if polls {
                defer { backoff = min(backoff * 2, 16_000_000) }
                return .poll(backoff)
            }
            let now = monotonicNow()
            if spinUntil == 0 { spinUntil = now &+ LockAcquirer.spinBudget }
            if now < spinUntil { return .retry }
            spinUntil = 0
            return .kernelWait
        }
    }

    /// Advances the cursor; returns the lock that is busy, nil when every lock is held.
    private func nextBusyLock(_ cursor: inout LockPlanCursor) throws(CoordinationError) -> (type: LockType, start: Int64, length: Int64)? {
        switch cursor.advance() {
        case .finished: return nil
        case .wouldDeadlock(let slot): throw deadlockError(slot)
        case .failed(let code): throw ioError(code)
        case .wait(let type, let start, let length):
            try checkLive()
            return (type, start, length)
        }
    }

    private func startKernelWait(_ busy: (type: LockType, start: Int64, length: Int64)) throws(CoordinationError) -> LockWait {
        let wait = LockWait(lease: lease)
        guard scope.register(wait, generation: generation) else { throw cancelledError() }
        wait.start(busy.type, start: busy.start, length: busy.length)
        return wait
    }

    private func accept(_ outcome: LockWait.Outcome, _ cursor: inout LockPlanCursor) throws(CoordinationError) {
        switch outcome {
        case .acquired: cursor.waited()
        case .timedOut: throw timeoutError()
        case .cancelled: throw cancelledError()
        case .failed(let code): throw ioError(code)
        }
    }

    private func checkLive() throws(CoordinationError) {
        if scope.isCancelled(since: generation) { throw cancelledError() }
        if monotonicNow() >= deadline { throw timeoutError() }
    }

    private var itemPath: String { items.map(\.absolute).joined(separator: "', '") }

    private func timeoutError() -> CoordinationError {
        CoordinationError(
            .timedOut, path: itemPath,
            message: "timed out waiting for other readers or writers of '\(itemPath)'; a process may hold it for long, or raise the coordinator's timeout")
    }

    private func cancelledError() -> CoordinationError {
        CoordinationError(.cancelled, path: itemPath, message: "coordination of '\(itemPath)' was cancelled")
    }

    private func deadlockError(_ slot: UInt64) -> CoordinationError {
        CoordinationError(
            .wouldDeadlock, path: itemPath,
            message: "a nested coordination of '\(itemPath)' conflicts with another holder and would wait out of lock order (lock slot \(slot)); request every item in one multi-item coordination instead of nesting")
    }

    private func ioError(_ code: Int32) -> CoordinationError {
        CoordinationError(
            .lockDirectoryUnavailable, path: itemPath,
            message: "locking the lock file for '\(itemPath)' failed", errno: code)
    }
}
