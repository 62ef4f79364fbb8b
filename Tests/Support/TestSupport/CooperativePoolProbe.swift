// A measure of whether Swift's cooperative pool is free: for tests of async forms that must not block it.
import Synchronization

/// Counts hops through Swift's cooperative pool until a deadline: each tick is a 1 ms sleep and its resumption.
///
/// A pool whose threads are all blocked (two on this machine) ticks never; a free one ticks hundreds of times in
/// 500 ms. Start it, run the work under test, then read `ticks()`.
public final class CooperativePoolProbe: Sendable {
    private let count: TaskCounter
    private let task: Task<Void, Error>

    /// Starts ticking now, until `deadline` (ticks after it are not counted).
    public init(until deadline: ContinuousClock.Instant) {
        let count = TaskCounter()
        self.count = count
        task = Task {
            while ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(1))
                if ContinuousClock.now < deadline { count.add() }
            }
        }
    }

    /// Waits for the deadline and returns how many ticks the pool ran.
    public func ticks() async throws -> Int {
        try await task.value
        return count.now
    }
}

/// A counter tasks and threads share.
public final class TaskCounter: Sendable {
    private let value = Atomic<Int>(0)
    public init() {}
    /// Adds one.
    public func add() { value.add(1, ordering: .relaxed) }
    /// The count now.
    public var now: Int { value.load(ordering: .relaxed) }
}
