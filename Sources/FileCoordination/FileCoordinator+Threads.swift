// Coordinations whose accessor is synchronous work for an async caller: the wait holds no thread, the work runs on a pool.
import Foundation

extension FileCoordinator {
    /// Coordinates `intents` as the synchronous `coordinate` calls do, blocking the calling thread while it waits.
    /// - Parameters:
    ///   - intents: the items and how each is accessed (all or nothing).
    ///   - accessor: receives the URLs to use, in the order of `intents`.
    /// - Returns: what the accessor returns.
    /// - Throws: `CoordinationError`, or what the accessor throws.
    package func coordinateBlocking<R>(with intents: [FileAccessIntent], byAccessor accessor: ([URL]) throws -> R) throws -> R {
        try perform(intents, accessor: accessor)
    }

    /// Coordinates `intents` for an async caller, then runs the synchronous `body` inside the coordination on one of
    /// `threads`.
    ///
    /// The wait holds no thread at all: a busy lock is tried again from the suspended task (backoff from 2 µs to
    /// 1 ms), never waited for in the kernel on an I/O or waiter thread, so any number of such waits leave `threads`
    /// free for other work. The wait ends as the blocking form's does: at this coordinator's `timeout` with
    /// `.timedOut`, or with `.cancelled` on `cancel()` or task cancellation. `body` runs with this coordination as the
    /// current one, so a synchronous coordination of the same items inside it (the synchronous call `body` wraps)
    /// nests in it and takes no lock of its own.
    /// - Parameters:
    ///   - intents: the items and how each is accessed (all or nothing).
    ///   - threads: the pool `body` runs on.
    ///   - body: the synchronous work, run once the locks are held.
    /// - Returns: what `body` returns.
    /// - Throws: `CoordinationError`, what `body` throws, or `CancellationError` (the task was cancelled once the
    ///   locks were held, before `body` started; `body` then never runs).
    package func coordinate<R: Sendable>(
        with intents: [FileAccessIntent], on threads: BlockingThreads, _ body: @escaping @Sendable () throws -> R
    ) async throws -> R {
        let operation = try prepare(intents)
        if let outer = operation.outer {
            let cursor = try await operation.acquireNested(in: outer)
            defer { operation.endNested(cursor, in: outer) }
            return try await threads.perform { try CoordinationContext.$current.withValue(outer) { try body() } }
        }
        let granted = try await observed(operation) { () async throws(CoordinationError) in try await operation.grant(polls: true) }
        defer {
            operation.removeSnapshots(granted.urls)
            if !operation.releasesEarly { operation.release(granted) }
        }
        if operation.releasesEarly {
            operation.release(granted)
            return try await threads.perform(body)
        }
        let context = granted.context
        return try await threads.perform { try CoordinationContext.$current.withValue(context) { try body() } }
    }
}
