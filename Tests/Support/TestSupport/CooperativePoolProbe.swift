// A measure of whether Swift's cooperative pool is free: for tests of async forms that must not block it.
import Synchronization

/// Counts hops through Swift's cooperative pool: each hop is a 1 ms sleep and its resumption.
///
/// A pool whose threads are all blocked (two on this machine) hops never. Two ways to use it:
/// - `hops(_:within:)`, for "the pool stays free": it asks for a number of hops and gives them a generous limit, so
///   that a loaded machine or a sanitizer only makes it slower, while a blocked pool still fails it (its hops stay
///   at 0 as long as whatever blocks it holds, and the tests' holders hold until the probe is done);
/// - `init(until:)` and `ticks()`, for the controls that show a blocked pool: how many hops fit before a deadline.
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

    /// Hops through the pool until `wanted` hops are done or `limit` has passed.
    ///
    /// - Parameters:
    ///   - wanted: the hops that show a free pool (50: a free pool does them in about 60 ms when the machine is quiet).
    ///   - limit: when to give up (seconds: room for a loaded machine under a sanitizer).
    /// - Returns: the hops done (`wanted` unless the pool was blocked for the whole limit) and the time they took.
    public static func hops(_ wanted: Int = 50, within limit: Duration = .seconds(30)) async throws -> (hops: Int, took: Duration) {
        let start = ContinuousClock.now
        var done = 0
        while done < wanted, ContinuousClock.now - start < limit {
            try await Task.sleep(for: .milliseconds(1))
            done += 1
        }
        return (done, ContinuousClock.now - start)
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
