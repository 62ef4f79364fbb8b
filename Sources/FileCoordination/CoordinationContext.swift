// The state of one outermost coordination while its accessor runs, found again by nested requests.
import Foundation
import Locking
import Synchronization

/// What an outermost coordination holds while its accessor runs.
///
/// Bound to the accessor through a task-local value, so a nested coordination in the same thread
/// or task (from any coordinator of the same domain) extends these locks instead of waiting for them.
final class CoordinationContext: Sendable {
    let domain: DomainState
    let lease: Lease
    /// What the lease holds, per slot (a short list: the items and their ancestors).
    private let held: Locked<[(slot: UInt64, needs: SlotNeeds)]>
    /// Paths written by this coordination (outermost and nested), for `item(at:didMoveTo:)`.
    let written: Locked<[String]>
    /// Moves reported with `item(at:didMoveTo:)`, in order.
    let moves = Locked<[(from: String, to: String)]>([])

    /// False once the outermost coordination has ended (an unstructured `Task` created inside the
    /// accessor inherits the task-local value and may outlive it).
    private let active = Atomic<Bool>(true)

    @TaskLocal static var current: CoordinationContext?

    var isActive: Bool { active.load(ordering: .acquiring) }

    func end() { active.store(false, ordering: .releasing) }

    init(domain: DomainState, lease: Lease, held: [(slot: UInt64, needs: SlotNeeds)], written: [String]) {
        self.domain = domain
        self.lease = lease
        self.held = Locked(held)
        self.written = Locked(written)
    }

    /// What the lease holds, keyed by slot.
    func heldBySlot() -> [UInt64: SlotNeeds] {
        held.withLock { Dictionary($0.map { ($0.slot, $0.needs) }, uniquingKeysWith: { $0.merged(with: $1) }) }
    }

    /// Records new holdings per slot (nil: the slot is no longer held).
    func update(_ changes: [(slot: UInt64, needs: SlotNeeds?)]) {
        held.withLock { held in
            for (slot, needs) in changes {
                held.removeAll { $0.slot == slot }
                if let needs { held.append((slot, needs)) }
            }
        }
    }
}

/// In-flight operations of one coordinator, so `cancel()` can stop them.
final class CancelScope: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var waits: [ObjectIdentifier: LockWait] = [:]
    }

    private let state = Locked(State())

    /// The generation an operation starts in; the operation is cancelled once it changes.
    var generation: UInt64 { state.withLock { $0.generation } }

    func isCancelled(since generation: UInt64) -> Bool { state.withLock { $0.generation != generation } }

    /// Registers a kernel wait; returns false (and does not register) if already cancelled.
    func register(_ wait: LockWait, generation: UInt64) -> Bool {
        state.withLock { state in
            guard state.generation == generation else { return false }
            state.waits[ObjectIdentifier(wait)] = wait
            return true
        }
    }

    func unregister(_ wait: LockWait) {
        _ = state.withLock { $0.waits.removeValue(forKey: ObjectIdentifier(wait)) }
    }

    /// Cancels every operation in flight.
    func cancelAll() {
        let waits = state.withLock { state in
            state.generation &+= 1
            let waits = Array(state.waits.values)
            state.waits = [:]
            return waits
        }
        for wait in waits { wait.resolve(.cancelled) }
    }
}
