internal import CShims
import Locking
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One domain's live lock in this process: makes `lock` take effect in every process at once.
///
/// Mechanism (works on a stock kernel; kernel key notifications are not used):
/// - A shared state page (`LiveState`) holds a lock epoch and the locked-class
///   mask. Every handle operation compares the epoch with the one its keys were
///   obtained under: one atomic load.
/// - Each attached process binds a Unix datagram socket in the domain's runtime
///   directory and runs a listener thread. `lock` bumps the epoch, destroys the
///   class keys, then sends every listener a lock message and waits for its
///   acknowledgement; a listener revokes (wipes the keys of) every handle whose
///   class is now locked — taking each handle's lock, so an operation in flight
///   finishes first — and then acknowledges. So when `lock` returns, no process
///   holds a locked class's key and no operation on one can succeed.
/// - A dead process's socket refuses messages (ECONNREFUSED) and is removed.
/// - The auto-lock deadline (`unlock --timeout`) lives in the page; each
///   listener wakes at it, and the first process to see it passed locks.
///
/// Events reach other processes in one datagram: tens of microseconds.
public final class LiveLock: Sendable {
    public let domainID: String
    let directory: String
    let state: LiveState
    private let listener: Listener
    /// The key holders of this process (handles, in-process key copies) that a lock of this domain revokes.
    let revocation: Revocation
    private let subscribers = Locked<[Int: @Sendable (DomainEvent) -> Void]>([:])
    private let nextID = Atomic<Int>(0)
    private let revocationHooks = Locked<[@Sendable (Set<ProtectionClass>) -> Void]>([])

    /// The classes `lock` locks by default (Apple's behaviour on device lock).
    public static let lockClasses: Set<ProtectionClass> = [.complete, .completeUnlessOpen]

    /// Attaches this process to the live lock of `domainID`.
    /// - Parameter runtimeDirectory: where the shared page and sockets live; default
    ///   `$XDG_RUNTIME_DIR/dataprotection`, else `/tmp/dataprotection-<uid>`.
    /// - Throws: `.io` when the directory is not private to this user or cannot be made.
    public init(domainID: String, runtimeDirectory: String? = nil) throws(ProtectionError) {
        self.domainID = domainID
        let root = runtimeDirectory ?? Self.defaultRuntimeRoot()
        directory = "\(root)/\(domainID)"
        for d in [root, directory, "\(directory)/l"] { try Self.makePrivateDirectory(d) }
        state = try LiveState(path: "\(directory)/state")
        revocation = Revocation(state: state)
        listener = try Listener(directory: "\(directory)/l")
        listener.start(self)
    }

    deinit { listener.stop() }

    static func defaultRuntimeRoot() -> String {
        if let x = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), !x.isEmpty, access(x, W_OK) == 0 { return "\(x)/dataprotection" }
        return "/tmp/dataprotection-\(getuid())"
    }

    static func makePrivateDirectory(_ d: String) throws(ProtectionError) {
        if mkdir(d, 0o700) != 0 && errno != EEXIST { throw .errno(errno, "create the runtime directory", d) }
        var st = stat()
        guard lstat(d, &st) == 0 else { throw .errno(errno, "inspect the runtime directory", d) }
        guard st.st_mode & S_IFMT == S_IFDIR, st.st_uid == getuid(), st.st_mode & 0o077 == 0 else {
            throw ProtectionError(.io(EPERM), "unable to use the runtime directory '\(d)': it must be a directory you own with mode 0700; run `chmod 700 \(d)` or remove it", path: d)
        }
    }

    // MARK: State

    /// Whether `complete` data is available (`isProtectedDataAvailable`).
    public var isProtectedDataAvailable: Bool { !isLocked(.complete) }

    /// Whether `c` is locked right now (auto-lock deadlines included).
    public func isLocked(_ c: ProtectionClass) -> Bool {
        _ = currentEpoch()
        return state.isLocked(c)
    }

    /// The epoch, after applying a passed auto-lock deadline (the per-operation check).
    @inline(__always)
    func currentEpoch() -> UInt64 {
        if state.autoLockDeadline != 0, state.lockIfDeadlinePassed(Self.lockClasses, nowMillis: unixMillis()) {
            revokeLocal(Self.lockClasses)
            emit(.didLock(Self.lockClasses))
        }
        return state.epoch
    }


    // MARK: Lock and unlock (called by whoever locks: the CLI or the library)

    /// What `lock` did.
    public struct LockReport: Sendable {
        public var epoch: UInt64
        /// Processes that acknowledged (this one included, if attached).
        public var processesAcknowledged: Int
        /// Listeners that did not answer in time (alive but stuck); their handles still fail by epoch.
        public var processesTimedOut: Int
        /// Sockets of dead processes removed.
        public var staleRemoved: Int
        public var elapsedMillis: Double
    }

    /// Tells every process the domain will lock at `deadlineUnixMillis`.
    public func announceWillLock(deadlineUnixMillis: Int64) {
        _ = broadcast(DomainEvent.willLock(deadlineUnixMillis: deadlineUnixMillis).encoded(), awaitAcks: false)
    }

    /// Locks `classes` everywhere: marks them locked, runs `destroyKeys`, makes every process wipe and acknowledge.
    /// - Parameters:
    ///   - destroyKeys: removes the class keys from where they live (the kernel keyring).
    ///   - timeoutMillis: how long to wait for each live process to acknowledge.
    @discardableResult
    public func lock(_ classes: Set<ProtectionClass> = LiveLock.lockClasses, timeoutMillis: Int = 2000,
                     destroyKeys: () throws(ProtectionError) -> Void) throws(ProtectionError) -> LockReport {
        let t0 = monotonicMillis()
        state.autoLockDeadline = 0
        let epoch = state.lock(classes)
        try destroyKeys()
        var report = broadcast(DomainEvent.didLock(classes).encoded(epoch: epoch), awaitAcks: true, timeoutMillis: timeoutMillis)
        report.epoch = epoch
        report.elapsedMillis = monotonicMillis() - t0
        return report
    }

    /// Marks `classes` unlocked, sets or clears the auto-lock deadline, and tells every process.
    public func unlock(_ classes: Set<ProtectionClass> = Set(ProtectionClass.allCases), autoLockAfterSeconds: Int? = nil) {
        state.unlock(classes)
        state.autoLockDeadline = autoLockAfterSeconds.map { unixMillis() + Int64($0) * 1000 } ?? 0
        _ = broadcast(DomainEvent.didUnlock.encoded(), awaitAcks: false)
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
        revocation.revokeLocked()
        for hook in revocationHooks.withLock({ $0 }) { hook(classes) }
    }

    func emit(_ e: DomainEvent) {
        for s in subscribers.withLock({ Array($0.values) }) { s(e) }
    }

    /// Handles one datagram on the listener thread; returns the reply, if any.
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
        var report = LockReport(epoch: 0, processesAcknowledged: 0, processesTimedOut: 0, staleRemoved: 0, elapsedMillis: 0)
        let dir = "\(directory)/l"
        let replyPath = "\(directory)/r-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        let fd = dp_unix_dgram_bind(replyPath)
        guard fd >= 0 else { return report }
        defer { Glibc.close(fd); unlink(replyPath) }
        var pending = 0
        for name in listDirectory(dir) where name.hasSuffix(".sock") {
            let path = "\(dir)/\(name)"
            let n = message.withUnsafeBytes { dp_unix_dgram_send(fd, path, $0.baseAddress, UInt($0.count)) }
            if n < 0 {
                if errno == ECONNREFUSED || errno == ENOENT { unlink(path); report.staleRemoved += 1 }
                continue
            }
            pending += 1
        }
        guard awaitAcks else { return report }
        let deadline = monotonicMillis() + Double(timeoutMillis)
        var buf = [UInt8](repeating: 0, count: 64)
        while pending > 0 {
            let wait = Int32(max(0, deadline - monotonicMillis()))
            let n = buf.withUnsafeMutableBytes { dp_unix_dgram_recv(fd, $0.baseAddress, UInt($0.count), wait, nil) }
            if n <= 0 { break }
            if buf.first == UInt8(ascii: "A") { report.processesAcknowledged += 1; pending -= 1 }
        }
        report.processesTimedOut = pending
        return report
    }
}

/// A subscription to domain events; `cancel()` (or dropping every reference to the LiveLock) ends it.
public final class EventSubscription: Sendable {
    private let cancelAction: Locked<(@Sendable () -> Void)?>
    init(_ cancel: @escaping @Sendable () -> Void) { cancelAction = Locked(cancel) }
    public func cancel() { cancelAction.withLock { $0?(); $0 = nil } }
}

/// The listener: one socket and one thread per attached domain and process.
final class Listener: @unchecked Sendable {
    // @unchecked: `fd` and `path` are immutable; `stopping` is atomic.
    let fd: Int32
    let path: String
    let stopping = Atomic<Bool>(false)

    init(directory: String) throws(ProtectionError) {
        path = "\(directory)/\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        fd = dp_unix_dgram_bind(path)
        guard fd >= 0 else { throw .errno(errno, "bind the lock listener", path) }
    }

    func start(_ owner: LiveLock) {
        // The thread holds the owner weakly: dropping the LiveLock stops the listener.
        let box = Unmanaged.passRetained(ListenerContext(listener: self, owner: owner))
        var tid = pthread_t()
        pthread_create(&tid, nil, { raw in
            let ctx = Unmanaged<ListenerContext>.fromOpaque(raw!).takeRetainedValue()
            ctx.listener.run(ctx)
            return nil
        }, box.toOpaque())
        pthread_detach(tid)
    }

    func run(_ ctx: ListenerContext) {
        var buf = [UInt8](repeating: 0, count: 256)
        var from = [CChar](repeating: 0, count: 110)
        while !stopping.load(ordering: .acquiring) {
            guard let owner = ctx.owner else { break }
            let deadline = owner.state.autoLockDeadline
            let timeout: Int32 = deadline == 0 ? 500 : Int32(max(0, min(500, deadline - unixMillis())))
            _ = owner.currentEpoch()  // applies a passed auto-lock deadline
            let n = buf.withUnsafeMutableBytes { b in from.withUnsafeMutableBufferPointer { dp_unix_dgram_recv(fd, b.baseAddress, UInt(b.count), timeout, $0.baseAddress) } }
            guard n > 0 else { continue }
            if let reply = owner.handle(buf[0..<n]), from[0] != 0 {
                let to = String(decoding: from.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                _ = reply.withUnsafeBytes { dp_unix_dgram_send(fd, to, $0.baseAddress, UInt($0.count)) }
            }
        }
        Glibc.close(fd)
        unlink(path)
    }

    func stop() { stopping.store(true, ordering: .releasing) }
}

final class ListenerContext: @unchecked Sendable {
    let listener: Listener
    weak var owner: LiveLock?
    init(listener: Listener, owner: LiveLock) { self.listener = listener; self.owner = owner }
}

func listDirectory(_ path: String) -> [String] {
    guard let d = opendir(path) else { return [] }
    defer { closedir(d) }
    var names: [String] = []
    while let e = readdir(d) {
        let name = entryName(e)
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}

@inline(__always)
func monotonicMillis() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) * 1000 + Double(ts.tv_nsec) / 1e6
}
