// The pool of long-lived threads on which kernel lock waits run.
import Dispatch
import Foundation
import Locking

/// Long-lived threads that run kernel lock waits, so starting a wait costs a wake-up, not a thread creation.
final class WaiterThreads: Sendable {
    static let shared = WaiterThreads()

    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var idle = 0
    }

    private let state = Locked(State())
    private let work = DispatchSemaphore(value: 0)

    /// Runs `job` on an idle waiter thread, starting a new one when all are busy.
    func run(_ job: @escaping @Sendable () -> Void) {
        let spawn = state.withLock { state -> Bool in
            state.jobs.append(job)
            if state.idle > 0 {
                state.idle -= 1
                return false
            }
            return true
        }
        if spawn {
            let thread = Thread { [self] in loop() }
            thread.name = "FileCoordination.LockWait"
            thread.start()
        } else {
            work.signal()
        }
    }

    private func loop() {
        while true {
            let job = state.withLock { state -> (@Sendable () -> Void)? in
                state.jobs.isEmpty ? nil : state.jobs.removeFirst()
            }
            if let job {
                job()
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
