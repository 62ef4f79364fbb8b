import SystemLayer
internal import PathSyntax
import DataProtectionTelemetry
import Locking
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One domain's live lock in this process: makes `lock` take effect in every process at once.
///
/// Mechanism (works on a stock kernel; kernel key notifications are not used), on SystemLayer's one IPC
/// primitive, a `RendezvousDirectory` in the domain's runtime directory:
/// - Its shared state page (`LiveState`) holds a lock epoch and the locked-class
///   mask. Every handle operation compares the epoch with the one its keys were
///   obtained under: one atomic load.
/// - Each attached process has one endpoint there, served on the endpoint's
///   receive thread, one event after another. `lock` bumps the epoch, destroys the
///   class keys, then broadcasts a lock message and waits for every endpoint's
///   acknowledgement; a listener revokes (wipes the keys of) every handle whose
///   class is now locked — taking each handle's lock, so an operation in flight
///   finishes first — and then acknowledges. So when `lock` returns, no process
///   holds a locked class's key and no operation on one can succeed.
/// - A dead process's endpoint (its liveness lock gone) is removed.
/// - Every lock warns first: one sequence (`runLockSequence`) sends every
///   listener `willLock` with a deadline, waits for it, then locks as above.
///   An explicit `lock` runs it in the caller. The auto-lock deadline
///   (`unlock --timeout`) and its grace live in the page; at deadline − grace
///   the first listener to claim the warning (one compare-and-swap) runs the
///   same sequence on a thread of its own, so one process sends each event and
///   every attached process receives it once. From the deadline on, every
///   per-operation check already treats the classes as locked.
///
/// Events reach other processes over one Unix stream connection each: tens of microseconds.
public final class LiveLock: Sendable {
    /// The domain this live lock belongs to (its identifier as 32 hex digits).
    public let domainID: String
    /// The domain's private runtime directory (mode 0700): its rendezvous, and the key store's write lock.
    package let directory: String
    let state: LiveState
    /// The domain's rendezvous (state page and one endpoint per attached process).
    private let rendezvous: RendezvousDirectory
    /// This process's endpoint: the listener that receives events and acknowledges locks.
    private let listener: RendezvousEndpoint
    /// The key holders of this process (handles, in-process key copies) that a lock of this domain revokes.
    package let revocation: Revocation
    private let subscribers = Locked<[Int: @Sendable (DomainEvent) -> Void]>([:])
    private let nextID = Atomic<Int>(0)
    private let revocationHooks = Locked<[@Sendable (Set<ProtectionClass>) -> Void]>([])

    /// The classes `lock` locks by default (Apple's behaviour on device lock).
    public static let lockClasses: Set<ProtectionClass> = [.complete, .completeUnlessOpen]

    /// How long before a lock `willLock` comes when the caller names no grace: half a second.
    ///
    /// Long enough for an app to finish what it is saving (a write, fsync and
    /// rename of a document take milliseconds on a local disk, tens on a slow
    /// one) and for the event to reach every process (tens of microseconds);
    /// short enough that `dpctl lock` still feels immediate. Apple gives about
    /// 10 s on device lock, where the dimming screen already told the person;
    /// here a command or a service asks for the lock and waits for it.
    /// `.zero` locks at once and sends no `willLock`.
    public static let defaultGrace: Duration = .milliseconds(500)

    /// How long after an auto-lock deadline another process locks if the one that sent `willLock` has not (it died).
    static let takeoverMillis: Int64 = 500

    /// Attaches this process to the live lock of `domainID`.
    /// - Parameters:
    ///   - domainID: the domain's identifier (`ProtectionDomain.id` as text); a domain attaches its own.
    ///   - runtimeDirectory: where the domain's rendezvous (shared page and endpoints) lives; default
    ///     `$XDG_RUNTIME_DIR/dataprotection`, else `/tmp/dataprotection-<uid>`.
    /// - Throws: `.io` when the directory is not private to this user or cannot be made.
    ///   - telemetry: where revocations are logged and lock latency recorded; nil for metrics only, under `domainID`.
    public init(domainID: String, runtimeDirectory: String? = nil, telemetry: Telemetry? = nil) throws(ProtectionError) {
        self.domainID = domainID
        let root = runtimeDirectory ?? Self.defaultRuntimeRoot()
        directory = "\(root)/\(domainID)"
        // Who may send lock events: whoever can reach the endpoints, so the directory is this user's, mode 0700.
        for d in [root, directory] { try Self.makePrivateDirectory(d) }
        let statePath = "\(directory)/\(RendezvousDirectory.pageName)"
        do throws(RendezvousDirectory.Failure) {
            rendezvous = try RendezvousDirectory(path: directory, words: LiveState.words, mode: 0o600) { owner, permissions in
                owner == getuid() && permissions & 0o077 == 0
            }
            listener = try rendezvous.attach()
        } catch {
            throw Self.error(error, statePath)
        }
        state = try LiveState(rendezvous: rendezvous, path: statePath)
        revocation = Revocation(state: state, telemetry: telemetry ?? Telemetry(domain: domainID))
        // The loop holds this LiveLock weakly: dropping it stops the listener (at its next tick, within 500 ms).
        listener.start(.inline, requestTimeoutMilliseconds: 2000, tick: { [weak self] in self?.autoLockTick() }) { [weak self] request, conversation in
            if let reply = self?.handle(request[...]) { _ = conversation.send(reply) }
        }
    }

    deinit { listener.stop() }

    /// Stops this process's listener for good and returns once its thread has ended and its endpoint is gone.
    ///
    /// For a graceful shutdown (`DataProtectionService`), after the process's keys were retired
    /// (`retireKeys()`): from then on this process neither receives events nor acknowledges locks, so a later `lock`
    /// counts it out as a process that left, and takes no auto-lock's turn here. Nothing protected is at stake: every
    /// handle of this process was closed and wiped by the retirement, and any handle still used fails by the epoch
    /// check of the shared page. Called from an event handler (the listener thread) it does not wait for itself.
    public func stopListening() { listener.stop(waiting: true) }

    /// Retires this domain's keys in this process for good: no new open, create or key fetch is admitted
    /// (`.shuttingDown`), and every open handle commits its journal, closes and wipes its keys.
    ///
    /// Returns once every handle has done so: an operation a handle is running finishes first (a write completes,
    /// or fails and leaves its journal to roll it back). The class keys themselves stay where they live (the kernel
    /// keyring) for other processes; the copies this process kept between opens (`ClassKeyCache`) are wiped with the handles.
    /// - Returns: how many handles (and other key holders) were retired.
    @discardableResult
    public func retireKeys() -> Int { revocation.retire() }

    /// The message for a rendezvous failure: the state page's steps, or the listener's.
    private static func error(_ failure: RendezvousDirectory.Failure, _ statePath: String) -> ProtectionError {
        switch failure {
        case .pageRefused:
            ProtectionError(.io(EPERM), "unable to use the lock state '\(statePath)': it must belong to you with mode 0600; remove it and retry", path: statePath)
        case .pageForeign(let what):
            ProtectionError(.io(EPERM), "unable to use the lock state '\(statePath)': it is \(what), not a lock-state file; remove it and retry", path: statePath)
        case .page(.open, let e): .errno(e.errno, "open the lock state", statePath)
        case .page(.inspect, let e): .errno(e.errno, "inspect the lock state", statePath)
        case .page(.resize, let e): .errno(e.errno, "size the lock state", statePath)
        case .page(.map, let e): .errno(e.errno, "map the lock state", statePath)
        case .liveness(let e), .listen(let e), .publish(let e):
            .errno(e.errno, "attach the lock listener in", parentDirectory(of: statePath))
        }
    }

    static func defaultRuntimeRoot() -> String { RuntimeDirectory.path("dataprotection") }

    static func makePrivateDirectory(_ d: String) throws(ProtectionError) {
        do throws(SystemError) { try io.makeDirectory(atPath: d, mode: 0o700) } catch {
            if error.errno != EEXIST { throw .errno(error.errno, "create the runtime directory", d) }
        }
        let st: stat
        do throws(SystemError) { st = try io.linkStatus(d) } catch { throw .errno(error.errno, "inspect the runtime directory", d) }
        guard st.st_mode & S_IFMT == S_IFDIR, st.st_uid == getuid(), st.st_mode & 0o077 == 0 else {
            throw ProtectionError(.io(EPERM), "unable to use the runtime directory '\(d)': it must be a directory you own with mode 0700; run `chmod 700 \(d)` or remove it", path: d)
        }
    }

    // MARK: State

    /// Whether `complete` data is available (`isProtectedDataAvailable`).
    public var isProtectedDataAvailable: Bool { !isLocked(.complete) }

    /// Whether `c` is locked right now (a passed auto-lock deadline included).
    public func isLocked(_ c: ProtectionClass) -> Bool {
        state.refusesKey(c)
    }

    /// Whether an auto-lock deadline has passed (or its lock is running) and the page does not yet say locked.
    @inline(__always)
    var autoLockPassed: Bool { state.autoLockPassed }

    // MARK: Lock and unlock (called by whoever locks: the CLI or the library)

    /// What `lock` did.
    public struct LockReport: Sendable {
        /// The lock epoch this lock moved to (every handle opened before it fails its next call by this number).
        public var epoch: UInt64
        /// Processes that acknowledged (this one included, if attached).
        public var processesAcknowledged: Int
        /// Listeners that did not answer in time (alive but stuck); their handles still fail by epoch.
        public var processesTimedOut: Int
        /// Sockets of dead processes removed.
        public var staleRemoved: Int
        /// From the lock step to the last acknowledgement (the grace before it not counted).
        public var elapsedMillis: Double
        /// The deadline the `willLock` sent before this lock named (Unix milliseconds); nil when none was sent (grace zero).
        public var warnedDeadlineUnixMillis: Int64?
    }

    /// Locks `classes` everywhere: tells every process `willLock`, waits `grace`, then marks them locked,
    /// runs `destroyKeys`, and makes every process wipe and acknowledge.
    /// - Parameters:
    ///   - classes: the classes to lock (A and B by default; add C for `--evict-all`).
    ///   - grace: how long apps get between `willLock` and the lock (`LiveLock.defaultGrace`);
    ///     `.zero` locks at once and sends no `willLock`.
    ///   - destroyKeys: removes the class keys from where they live (the kernel keyring).
    ///   - timeoutMillis: how long to wait for each live process to acknowledge.
    /// - Returns: who acknowledged, who timed out, and how long it took.
    /// - Throws: what `destroyKeys` throws (the classes are marked locked already, so handles still fail).
    @discardableResult
    public func lock(_ classes: Set<ProtectionClass> = LiveLock.lockClasses, grace: Duration = LiveLock.defaultGrace, timeoutMillis: Int = 2000,
                     destroyKeys: () throws(ProtectionError) -> Void) throws(ProtectionError) -> LockReport {
        let deadline = unixMillis() + Self.milliseconds(grace)
        // An explicit lock always locks, so the sequence always reports.
        return try runLockSequence(classes, deadline: deadline, warn: true, autoLock: nil, timeoutMillis: timeoutMillis, destroyKeys: destroyKeys)!
    }

    /// The one lock sequence, for `lock` and the auto-lock: `willLock` to every process, the wait, then the lock.
    ///
    /// - Parameters:
    ///   - deadline: when the lock happens (Unix milliseconds); `willLock` is sent only if it is still ahead.
    ///   - warn: false for an auto-lock taken over from a process that claimed the warning and died (it was sent).
    ///   - autoLock: the auto-lock deadline this sequence locks for; nil for an explicit lock.
    /// - Returns: nil when an auto-lock was no longer due (an unlock or a lock changed the deadline, or
    ///   another process locked it first): then nothing is locked and no `didLock` is sent.
    private func runLockSequence(
        _ classes: Set<ProtectionClass>, deadline: Int64, warn: Bool, autoLock: Int64?, timeoutMillis: Int,
        destroyKeys: () throws(ProtectionError) -> Void
    ) throws(ProtectionError) -> LockReport? {
        let warned = warn && deadline > unixMillis()
        let staleAtWarning = warned ? broadcast(DomainEvent.willLock(deadlineUnixMillis: deadline).encoded(), awaitAcks: false).staleRemoved : 0
        // The coarse clock lags the precise one, so every process's clock has reached the deadline when this one has.
        while case let left = deadline - unixMillis(), left > 0 { usleep(UInt32(min(left, 100)) * 1000) }
        let t0 = monotonicMillis()
        let epoch: UInt64
        if let due = autoLock {
            guard let e = state.lockAtDeadline(due, classes) else { return nil }
            epoch = e
        } else {
            epoch = state.lock(classes)  // mask and epoch first: a passed deadline cleared below never reads as unlocked
            state.autoLockDeadline = 0
        }
        try destroyKeys()
        var report = broadcast(DomainEvent.didLock(classes).encoded(epoch: epoch), awaitAcks: true, timeoutMillis: timeoutMillis)
        report.epoch = epoch
        report.staleRemoved += staleAtWarning
        report.elapsedMillis = monotonicMillis() - t0
        report.warnedDeadlineUnixMillis = warned ? deadline : nil
        revocation.telemetry.metrics.lockDuration.recordNanoseconds(Int64(report.elapsedMillis * 1_000_000))
        revocation.telemetry.log(report.processesTimedOut > 0 ? .warning : .info, "lock sequence done", [
            "operation": .string(autoLock == nil ? "lock" : "autoLock"), "classes": .string(classes.map(\.description).sorted().joined(separator: ",")),
            "epoch": .stringConvertible(epoch), "processes": .stringConvertible(report.processesAcknowledged),
            "timedOut": .stringConvertible(report.processesTimedOut), "duration_ms": .stringConvertible(report.elapsedMillis),
        ])
        return report
    }

    /// Marks `classes` unlocked, sets or clears the auto-lock deadline, and tells every process.
    /// - Parameters:
    ///   - classes: the classes to mark unlocked (all of them by default).
    ///   - autoLockAfterSeconds: lock classes A and B again after this long; nil for never.
    ///   - grace: how long before that auto-lock every process gets `willLock`; `.zero` for no warning.
    public func unlock(_ classes: Set<ProtectionClass> = Set(ProtectionClass.allCases), autoLockAfterSeconds: Int? = nil, grace: Duration = LiveLock.defaultGrace) {
        state.unlock(classes)
        state.setAutoLock(deadline: autoLockAfterSeconds.map { unixMillis() + Int64($0) * 1000 } ?? 0, graceMillis: Self.milliseconds(grace))
        _ = broadcast(DomainEvent.didUnlock.encoded(), awaitAcks: false)
    }

    /// Starts this process's part of an auto-lock when its time comes; returns how long the listener may wait (ms).
    ///
    /// At deadline − grace the first process to claim the warning runs the lock
    /// sequence on a thread of its own (the listener must stay free to receive
    /// that sequence's own `willLock` and acknowledge its `didLock`). Should
    /// that process die before locking, the first listener to find the deadline
    /// still set `takeoverMillis` after it locks, without a second warning.
    func autoLockTick() -> Int32 {
        let due = state.autoLockDeadline
        guard due > 0 else { return 500 }
        let now = unixMillis()
        if state.warnedDeadline != due {
            let warnAt = due - max(0, state.autoLockGraceMillis)
            if now < warnAt { return Int32(min(500, warnAt - now)) }
            if state.claimWarning(due) { startAutoLock(due, warn: true) }
        } else if now >= due + Self.takeoverMillis {
            startAutoLock(due, warn: false)
        }
        return Int32(max(1, min(500, due + Self.takeoverMillis - now)))
    }

    private func startAutoLock(_ due: Int64, warn: Bool) {
        // The thread keeps this LiveLock alive until the sequence ends (at most the grace plus the acknowledgements).
        detachThread { [self] in
            // The keys themselves expire in their store at the deadline (`unlock(timeout:)` gave them that expiry).
            _ = try? runLockSequence(Self.lockClasses, deadline: due, warn: warn, autoLock: due, timeoutMillis: 2000) { () throws(ProtectionError) in }
        }
    }

    /// `d` in whole milliseconds (negative durations count as zero).
    static func milliseconds(_ d: Duration) -> Int64 {
        max(0, d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000)
    }

    /// The auto-lock deadline in Unix milliseconds, if one is set.
    public var autoLockDeadlineUnixMillis: Int64? { let d = state.autoLockDeadline; return d == 0 ? nil : d }

    // MARK: Events

    /// Calls `handler` (on the listener thread) for every event; keep the returned token to stay subscribed.
    public func onEvent(_ handler: @escaping @Sendable (DomainEvent) -> Void) -> EventSubscription {
        let id = nextID.add(1, ordering: .relaxed).newValue
        subscribers.withLock { $0[id] = handler }
        return EventSubscription { [weak self] in _ = self?.subscribers.withLock { $0.removeValue(forKey: id) } }
    }

    /// Events as an `AsyncSequence`; the subscription ends when iteration ends.
    public func events() -> AsyncStream<DomainEvent> {
        AsyncStream { continuation in
            let sub = onEvent { continuation.yield($0) }
            continuation.onTermination = { _ in sub.cancel() }
        }
    }

    /// Suspends until `c` is unlocked (returns at once if it is); the "resume cleanly" half of "fail cleanly".
    public func waitUntilUnlocked(_ c: ProtectionClass = .complete) async {
        let stream = events()  // subscribe before checking, so an unlock in between is not missed
        if !isLocked(c) { return }
        for await _ in stream where !isLocked(c) { return }
    }

    /// Runs `operation`; while it fails with `.locked`, waits for unlock and runs it again.
    /// - Parameters:
    ///   - c: the class whose unlock to wait for.
    ///   - operation: the work to run, again after each unlock while it fails `.locked`.
    /// - Returns: what `operation` returns.
    /// - Throws: what `operation` throws other than `.locked`; `CancellationError` when the task is cancelled.
    public func retryAfterUnlock<R: Sendable>(_ c: ProtectionClass = .complete, _ operation: () async throws -> R) async throws -> R {
        while true {
            do { return try await operation() } catch let e as ProtectionError where e.code == .locked {
                try Task.checkCancellation()
                await waitUntilUnlocked(c)
            }
        }
    }

    /// Registers a hook run (on the listener thread) when classes lock, before the acknowledgement:
    /// for caches of class keys that must be wiped too.
    public func addRevocationHook(_ hook: @escaping @Sendable (Set<ProtectionClass>) -> Void) {
        revocationHooks.withLock { $0.append(hook) }
    }

    // MARK: Handles

    /// Number of open handles (and other key holders) of this domain in this process.
    public var openHandleCount: Int { revocation.holderCount }

    /// Revocations in this process waiting for key acquisitions in flight (the interleaving test watches it).
    package var revocationsWaiting: Int { revocation.revocationsWaiting }

    /// Revokes every registered key holder of a class now locked, and runs the hooks.
    func revokeLocal(_ classes: Set<ProtectionClass>) {
        let t0 = Telemetry.now()
        let holders = revocation.revokeLocked()
        let ns = Telemetry.elapsed(since: t0)
        revocation.telemetry.log(.info, "revoked this process's key holders", [
            "operation": "revoke", "classes": .string(classes.map(\.description).sorted().joined(separator: ",")),
            "holders": .stringConvertible(holders), "pid": .stringConvertible(getpid()), "duration_ms": Telemetry.millis(ns),
        ])
        for hook in revocationHooks.withLock({ $0 }) { hook(classes) }
    }

    func emit(_ e: DomainEvent) {
        for s in subscribers.withLock({ Array($0.values) }) { s(e) }
    }

    /// Handles one event on the listener thread; returns the reply (the acknowledgement of a lock), if any.
    func handle(_ bytes: ArraySlice<UInt8>) -> [UInt8]? {
        guard let (event, epoch) = DomainEvent.decode(bytes) else { return nil }
        if case .didLock(let classes) = event {
            revokeLocal(classes)
            emit(event)
            return Array("A \(epoch)".utf8)
        }
        emit(event)
        return nil
    }

    /// Sends `message` to every listener of the domain; with `awaitAcks`, waits for each live one to answer.
    private func broadcast(_ message: [UInt8], awaitAcks: Bool, timeoutMillis: Int = 2000) -> LockReport {
        let sent = rendezvous.broadcast(message, replyWithinMilliseconds: awaitAcks ? Int32(clamping: timeoutMillis) : nil)
        return LockReport(epoch: 0, processesAcknowledged: sent.replied, processesTimedOut: sent.timedOut, staleRemoved: sent.removed, elapsedMillis: 0)
    }
}

/// A subscription to domain events; `cancel()` (or dropping every reference to the LiveLock) ends it.
public final class EventSubscription: Sendable {
    private let cancelAction: Locked<(@Sendable () -> Void)?>
    init(_ cancel: @escaping @Sendable () -> Void) { cancelAction = Locked(cancel) }
    /// Ends the subscription: the handler is not called again.
    public func cancel() { cancelAction.withLock { $0?(); $0 = nil } }
}

/// The live lock's system calls (its runtime directories): the real ones, on the host's runtime directory.
private let io = SystemFileIO()

@inline(__always)
func monotonicMillis() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) * 1000 + Double(ts.tv_nsec) / 1e6
}
