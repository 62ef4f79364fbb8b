import DataProtectionTelemetry
import Locking
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Something that holds key material a lock must take away: an open protected-file handle, or an in-process
/// copy of class keys.
package protocol KeyHolder: AnyObject, Sendable {
    /// Drops (wipes) every key this holder has of a class for which `locked` is true.
    ///
    /// Called on the thread that applies a lock, after an acquisition in flight finished; an operation the
    /// holder is running finishes first (the holder takes its own lock).
    func revoke(where locked: (ProtectionClass) -> Bool)

    /// Ends this holder for good at shutdown (`Revocation.retire`): a handle commits its journal, closes its
    /// descriptors and wipes its keys; later calls throw `error`. The holder stays registered until it is closed or
    /// freed, as usual. An operation the holder is running finishes first.
    func retire(_ error: ProtectionError)
}

extension KeyHolder {
    /// What a holder with nothing to commit does at shutdown: drops every key it has.
    package func retire(_ error: ProtectionError) { revoke(where: { _ in true }) }
}

/// The lock state a `Revocation` follows: the domain's shared page (`LiveState`), or an in-process store's own.
@usableFromInline package protocol RevocationState: Sendable {
    /// +1 on every lock; a holder compares it with the epoch its keys were obtained under.
    var epoch: UInt64 { get }
    /// Whether keys of class `c` must be dropped now (classes A and C when locked; B keeps open files; D never locks).
    func revokes(_ c: ProtectionClass) -> Bool
}

/// The one mechanism by which a lock takes keys away from this process: a registry of key holders behind a gate.
///
/// Key material enters the process only through `admit` (shared side of the gate): it checks the lock state, and
/// the body registers the holder of the keys before the gate is released. `revokeLocked` (exclusive side) lists the
/// holders and revokes those of locked classes. A lock marks its classes locked before it revokes, so every
/// acquisition either sees "locked" or is listed.
///
/// `epoch`, `revokes` and `admit` are inlinable: ProtectedFileHandle (DataProtectionFiles) checks the first two on
/// every read and write, and every open goes through `admit`; they were inlined there before the modules split.
@usableFromInline package final class Revocation: Sendable {
    @usableFromInline package let state: any RevocationState
    @usableFromInline let gate = ReadWriteGate()
    private let holders = Locked(Registry())
    /// Key holders that live as long as the keys' source (a domain's `ClassKeyCache`): held strongly, not counted as
    /// open handles, wiped by every revocation and by `retire` while the gate is held exclusively.
    private let caches = Locked<[any KeyHolder]>([])
    private let waiting = Atomic<Int>(0)
    /// Set once by `retire`: every later admission throws `.shuttingDown` (one relaxed load per open, none per read or write).
    @usableFromInline let retired = Atomic<Bool>(false)

    /// Revocations waiting for acquisitions in flight to finish (for the interleaving test).
    package var revocationsWaiting: Int { waiting.load(ordering: .sequentiallyConsistent) }

    /// The domain's logger and metrics: `.locked` refusals are counted here, the one place they are decided.
    @usableFromInline package let telemetry: Telemetry

    init(state: any RevocationState, telemetry: Telemetry) {
        self.state = state
        self.telemetry = telemetry
    }

    /// Counts (`dataprotection_locked_errors_total`) and logs at debug a `.locked` refusal of class `c`: one raised
    /// here, or by a key provider inside an admission (a class locked by another process, B's private key).
    @usableFromInline package func countRefusal(_ c: ProtectionClass, _ via: ProtectedDataEntryPoint) {
        telemetry.metrics.lockedErrors[c].increment()
        telemetry.log(.debug, "refused: class locked", ["class": .string(c.description), "operation": .string("\(via)")])
    }

    /// The `.locked` error for class `c`, counted and logged (`countRefusal`).
    @usableFromInline package func refusal(_ c: ProtectionClass, _ via: ProtectedDataEntryPoint) -> ProtectionError {
        countRefusal(c, via)
        return .locked(c)
    }

    /// The current lock epoch (one atomic load).
    @inlinable package var epoch: UInt64 { state.epoch }

    /// Whether keys of class `c` must be dropped now.
    @inlinable package func revokes(_ c: ProtectionClass) -> Bool { state.revokes(c) }

    /// Runs one acquisition of keys of class `c` (see `ClassKeys.admit`).
    @inlinable package func admit<R: ~Copyable>(
        _ c: ProtectionClass, also other: ProtectionClass? = nil, via: ProtectedDataEntryPoint, _ body: (UInt64) throws(ProtectionError) -> R
    ) throws(ProtectionError) -> R {
        via.record()
        return try gate.shared { () throws(ProtectionError) -> R in
            if _slowPath(retired.load(ordering: .relaxed)) { throw .retired }
            let epoch = state.epoch
            if state.revokes(c) { throw refusal(c, via) }
            if let other, state.revokes(other) { throw refusal(other, via) }
            return try body(epoch)
        }
    }

    /// Throws `.locked` when class `c` is locked now: a cheap refusal before a call makes anything (`admit` checks again).
    package func refuseIfLocked(_ c: ProtectionClass, via: ProtectedDataEntryPoint) throws(ProtectionError) {
        via.record()
        if _slowPath(retired.load(ordering: .relaxed)) { throw .retired }
        if state.revokes(c) { throw refusal(c, via) }
    }

    /// Ends this process's use of these keys for good (a service's graceful shutdown): no admission succeeds again, and
    /// every registered holder is retired (a handle commits, closes and wipes its keys).
    ///
    /// The same gate as a lock's revocation: the flag is set first, then the exclusive side waits for acquisitions in
    /// flight, so each either registered its holder (and is retired here) or sees the flag and throws `.shuttingDown`.
    /// An operation a handle is running (a write, a sync) finishes first: the handle's own lock orders it.
    /// Must not be called by a thread inside `admit` or holding a holder's own lock.
    /// - Returns: how many holders were retired.
    @discardableResult
    package func retire() -> Int {
        retired.store(true, ordering: .relaxed)
        gate.exclusive { for c in caches.withLock({ $0 }) { c.retire(.retired) } }
        let error = ProtectionError.retired
        return holders.withLock { table in
            var n = 0
            for case let entry? in table.slots {
                entry.holder.retire(error)
                n += 1
            }
            return n
        }
    }

    /// Whether `retire` has run (the keys' service shut down).
    package var isRetired: Bool { retired.load(ordering: .relaxed) }

    /// Registers `holder` and returns its slot (for `unregister(slot:)`); call it inside `admit`'s body, before the
    /// keys it holds are used.
    ///
    /// The registry does not retain its holders (no weak reference either: a weak reference gives every handle a
    /// side table, which costs an allocation per open). Every holder unregisters itself before it is freed (a handle
    /// in `close` and in `deinit`), and `revokeLocked` reaches holders only while it holds the registry's lock, which
    /// that unregistration takes: so a registered holder is always a live object. Slots instead of a dictionary:
    /// registering and unregistering hash nothing (every open and close does both).
    package func register(_ holder: any KeyHolder) -> Int { holders.withLock { $0.insert(Unowned(holder)) } }

    /// Forgets the holder in `slot` (it closed, or is being freed); a negative slot is none.
    package func unregister(slot: Int) {
        guard slot >= 0 else { return }
        holders.withLock { $0.remove(slot) }
    }

    /// Adds `cache` to what every revocation and `retire` wipe, for as long as this revocation lives.
    ///
    /// For a holder that lasts as long as the keys' source and fills itself only inside `admit` (a domain's
    /// `ClassKeyCache`); it is not an open handle, so `holderCount` does not count it.
    package func attach(cache: any KeyHolder) { caches.withLock { $0.append(cache) } }

    /// Number of registered holders.
    package var holderCount: Int { holders.withLock { $0.count } }

    /// Revokes the keys of every class the state now says to revoke, in every registered holder.
    ///
    /// Waits for acquisitions in flight (they either registered their holder by then, or will see the lock), then
    /// revokes each holder with the registry locked (see `register`: that is what keeps them alive); a holder's
    /// revoke waits for the operation it is running. Must not be called by a thread inside `admit` or holding a
    /// holder's own lock.
    /// - Returns: how many holders were visited (each dropped the keys of its class if that class is locked).
    @discardableResult
    package func revokeLocked() -> Int {
        waiting.add(1, ordering: .sequentiallyConsistent)
        let state = state
        let locked: (ProtectionClass) -> Bool = { state.revokes($0) }  // one closure for every holder
        // Acquisitions in flight have registered by now, and later ones see the lock. The caches are wiped while no
        // acquisition runs: none is using a cached key, and none can put back a key fetched before the lock.
        gate.exclusive { for c in caches.withLock({ $0 }) { c.revoke(where: locked) } }
        waiting.subtract(1, ordering: .sequentiallyConsistent)
        return holders.withLock { table in
            for case let entry? in table.slots { entry.holder.revoke(where: locked) }
            return table.count
        }
    }
}

/// The registered key holders: a slot each, and the free slots to reuse.
private struct Registry {
    var slots: [Unowned?] = []
    var free: [Int] = []
    var count = 0

    mutating func insert(_ h: Unowned) -> Int {
        count += 1
        if let i = free.popLast() {
            slots[i] = h
            return i
        }
        slots.append(h)
        return slots.count - 1
    }

    mutating func remove(_ i: Int) {
        precondition(slots[i] != nil, "a key holder unregistered twice")
        slots[i] = nil
        free.append(i)
        count -= 1
    }
}

/// An unretained reference to a registered key holder (see `Revocation.register`).
struct Unowned: @unchecked Sendable {
    // @unchecked: read only under Revocation.holders' lock, while the holder is registered and so alive.
    unowned(unsafe) let holder: any KeyHolder
    init(_ h: any KeyHolder) { holder = h }
}

/// A test seam inside the gate: runs a hook once key material was obtained and before its holder is registered (or,
/// for a rewrap, before it is wiped), so a test can start a lock at exactly that moment: the interleaving of issue 19
/// defect 5. Off in production: one atomic load. The probe points (`keysObtained`) are package-level; installing a
/// hook (`AdmissionProbe.with`) is testing SPI.
package enum AdmissionPoint {
    // Written only before `installed` is set (release) and read only after it was seen set (acquire).
    @usableFromInline nonisolated(unsafe) static var hook: (@Sendable (ProtectionClass) -> Void)?
    @usableFromInline static let installed = Atomic<Bool>(false)

    /// Runs the installed hook, if any (every open in DataProtectionFiles calls this: inlinable).
    @inlinable package static func keysObtained(_ c: ProtectionClass) {
        if _slowPath(installed.load(ordering: .acquiring)) { hook?(c) }
    }
}

/// Test hook: installs the hook `AdmissionPoint.keysObtained` runs (the guarantee matrix's lock-while-open cells).
@_spi(Testing) public enum AdmissionProbe {
    /// Test hook: installs `hook` for the duration of `body` (tests only; one at a time).
    public static func with<R>(_ hook: @escaping @Sendable (ProtectionClass) -> Void, _ body: () throws -> R) rethrows -> R {
        AdmissionPoint.hook = hook
        AdmissionPoint.installed.store(true, ordering: .releasing)
        defer { AdmissionPoint.installed.store(false, ordering: .releasing) }
        return try body()
    }
}
