// Blocking lock waits on dedicated threads, with deadlines and cancellation, never on the cooperative pool.
internal import SystemLayer
import Dispatch
import Foundation
import Locking

/// One kernel wait (`F_OFD_SETLKW`) run on its own thread, which the requester can abandon.
///
/// The requester waits for the first of: the lock granted, the deadline, or cancellation. If it
/// gives up first, the lease is poisoned: the waiting thread, when the kernel eventually grants the
/// lock, releases everything on that descriptor, and the descriptor is closed once both have let
/// go, so an abandoned wait never leaves a lock behind and the descriptor is never reused.
final class LockWait: Sendable {
    enum Outcome: Sendable, Equatable {
        case acquired
        case failed(Int32)
        case timedOut
        case cancelled
    }

    private struct State {
        var outcome: Outcome?
        var continuation: CheckedContinuation<Outcome, Never>?
        var threadFinished = false
    }

    private let state = Locked(State())
    private let semaphore = DispatchSemaphore(value: 0)
    let lease: Lease

    init(lease: Lease) { self.lease = lease }

    /// Starts the kernel wait on a waiter thread.
    func start(_ type: LockType, start: Int64, length: Int64) {
        let fd = lease.fd
        lease.retain()
        BlockingThreads.lockWaits.run { [self] in
            let result = OFDLock.waitSet(fd: fd, type, start: start, length: length)
            let outcome: Outcome = result == .done ? .acquired : .failed(errnoOf(result))
            if !resolve(outcome) {
                // The requester gave up and poisoned the lease: drop whatever the kernel granted.
                OFDLock.unlockAll(fd: fd)
            }
            lease.release()
        }
    }

    /// Resolves the wait once; returns false when it was already resolved.
    @discardableResult
    func resolve(_ outcome: Outcome) -> Bool {
        let continuation: CheckedContinuation<Outcome, Never>?
        let won = state.withLock { state -> Bool in
            guard state.outcome == nil else { return false }
            state.outcome = outcome
            return true
        }
        guard won else { return false }
        if outcome == .timedOut || outcome == .cancelled { lease.poison() }
        continuation = state.withLock { state in
            let c = state.continuation
            state.continuation = nil
            return c
        }
        semaphore.signal()
        continuation?.resume(returning: outcome)
        return true
    }

    /// Blocks the calling thread until the outcome, or the deadline (in `DispatchTime` nanoseconds).
    func waitBlocking(deadline: UInt64) -> Outcome {
        if semaphore.wait(timeout: DispatchTime(uptimeNanoseconds: deadline)) == .timedOut {
            resolve(.timedOut)
        }
        return state.withLock { $0.outcome } ?? .timedOut
    }

    /// Suspends the task until the outcome, the deadline, or Task cancellation; no thread is blocked.
    func waitAsync(deadline: UInt64) async -> Outcome {
        let timer = Task.detached { [self] in
            let now = DispatchTime.now().uptimeNanoseconds
            if deadline > now { try? await Task.sleep(nanoseconds: deadline - now) }
            if !Task.isCancelled { resolve(.timedOut) }
        }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
                let ready = state.withLock { state -> Outcome? in
                    if let outcome = state.outcome { return outcome }
                    state.continuation = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            resolve(.cancelled)
        }
    }
}

private func errnoOf(_ result: OFDLock.Result) -> Int32 {
    if case .failed(let code) = result { return code }
    return 0
}
