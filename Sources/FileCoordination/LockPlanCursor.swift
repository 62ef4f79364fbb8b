// Walks a lock plan step by step, so the same walk serves blocking, async and nested waits.
internal import SystemLayer

/// The steps that take one plan's locks on one lease, in the global order (slot, then gate, item, subtree).
///
/// Each slot is taken writer-preferring: a writer first takes the slot's gate byte exclusively and
/// keeps it while it waits for the item and subtree bytes; readers and descendants take the gate
/// shared together with what they need, in one range, and drop it at once. A waiting writer
/// therefore stops new readers from entering, so a stream of readers cannot starve it.
struct LockPlanCursor {
    enum Advance: Equatable {
        case finished
        /// The next lock conflicts; wait for it (it may block: it is above everything held).
        case wait(type: LockType, start: Int64, length: Int64)
        /// The next lock conflicts and waiting for it could deadlock.
        case wouldDeadlock(slot: UInt64)
        case failed(Int32)
    }

    private enum Kind {
        case fastTry(start: Int64, length: Int64, type: LockType, skipTo: Int)
        case lock(start: Int64, length: Int64, type: LockType)
        case unlock(start: Int64, length: Int64)
    }

    private struct Step {
        var slot: UInt64
        var kind: Kind
        var mayBlock: Bool
    }

    private var steps: [Step] = []
    private var index = 0
    private let fd: Int32
    /// The slots and needs this plan changes, with what was held before (for rollback).
    private(set) var touched: [(slot: UInt64, before: SlotNeeds?, after: SlotNeeds)] = []

    /// Prepares the steps for `plan` on top of `held`.
    /// - Parameters:
    ///   - plan: per-slot needs sorted by slot.
    ///   - held: what the lease already holds (empty for an outermost coordination).
    ///   - fd: the lease's descriptor.
    init(plan: [(slot: UInt64, needs: SlotNeeds)], held: [UInt64: SlotNeeds], fd: Int32) {
        self.fd = fd
        steps.reserveCapacity(plan.count * 2 + 4)
        let highestHeld = held.keys.max()
        for (slot, needs) in plan {
            let before = held[slot]
            let target = (before ?? .none).merged(with: needs)
            if let before, before.covers(target) { continue }
            touched.append((slot, before, target))
            // Waiting is safe only for locks above everything held: then no cycle can form.
            let mayBlock = before == nil && (highestHeld.map { slot > $0 } ?? true)
            appendSteps(slot: slot, target: target, mayBlock: mayBlock)
        }
    }

    private mutating func appendSteps(slot: UInt64, target: SlotNeeds, mayBlock: Bool) {
        let base = LockLayout.offset(ofSlot: slot)
        let gateUnlock = Step(slot: slot, kind: .unlock(start: base + SlotByte.gate, length: 1), mayBlock: mayBlock)
        let uniform: (start: Int64, length: Int64, type: LockType)? =
            switch (target.item, target.subtree) {
            case (let t?, nil): (base + SlotByte.item, 2, t)
            case (nil, let t?): (base + SlotByte.gate, 2, t)
            case (let a?, let b?) where a == b: (base + SlotByte.item, 3, a)
            default: nil
            }
        if !target.isWriter, let uniform {
            steps.append(Step(slot: slot, kind: .lock(start: uniform.start, length: uniform.length, type: .shared), mayBlock: mayBlock))
            steps.append(gateUnlock)
            return
        }
        var writer: [Step] = [
            Step(slot: slot, kind: .lock(start: base + SlotByte.gate, length: 1, type: .exclusive), mayBlock: mayBlock)
        ]
        if let item = target.item {
            writer.append(Step(slot: slot, kind: .lock(start: base + SlotByte.item, length: 1, type: item), mayBlock: mayBlock))
        }
        if let subtree = target.subtree {
            writer.append(Step(slot: slot, kind: .lock(start: base + SlotByte.subtree, length: 1, type: subtree), mayBlock: mayBlock))
        }
        if let uniform {
            let skipTo = steps.count + 1 + writer.count
            steps.append(Step(
                slot: slot, kind: .fastTry(start: uniform.start, length: uniform.length, type: uniform.type, skipTo: skipTo),
                mayBlock: mayBlock))
        }
        steps.append(contentsOf: writer)
        steps.append(gateUnlock)
    }

    /// Takes every lock it can without waiting and reports what stops it.
    mutating func advance() -> Advance {
        while index < steps.count {
            let step = steps[index]
            switch step.kind {
            case .fastTry(let start, let length, let type, let skipTo):
                switch OFDLock.trySet(fd: fd, type, start: start, length: length) {
                case .done: index = skipTo
                case .wouldBlock: index += 1
                case .failed(let code): return .failed(code)
                }
            case .lock(let start, let length, let type):
                switch OFDLock.trySet(fd: fd, type, start: start, length: length) {
                case .done: index += 1
                case .wouldBlock:
                    return step.mayBlock ? .wait(type: type, start: start, length: length) : .wouldDeadlock(slot: step.slot)
                case .failed(let code): return .failed(code)
                }
            case .unlock(let start, let length):
                _ = OFDLock.trySet(fd: fd, nil, start: start, length: length)
                index += 1
            }
        }
        return .finished
    }

    /// Records that the lock reported by the last `.wait` is now held.
    mutating func waited() { index += 1 }

    /// Puts every touched slot back to what it held before (used when a nested request fails or ends).
    func rollBack() {
        for (slot, before, _) in touched.reversed() {
            let base = LockLayout.offset(ofSlot: slot)
            guard let before else {
                _ = OFDLock.trySet(fd: fd, nil, start: base, length: SlotByte.width)
                continue
            }
            // Downgrading or releasing never waits.
            _ = OFDLock.trySet(fd: fd, before.item, start: base + SlotByte.item, length: 1)
            _ = OFDLock.trySet(fd: fd, nil, start: base + SlotByte.gate, length: 1)
            _ = OFDLock.trySet(fd: fd, before.subtree, start: base + SlotByte.subtree, length: 1)
        }
    }
}
