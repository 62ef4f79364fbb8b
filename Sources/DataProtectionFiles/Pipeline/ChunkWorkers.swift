import DataProtectionKeys
import SystemLayer

#if canImport(Glibc)
import Glibc
#endif

/// Helper threads for chunk work: one per extra core, started on first use and kept for the life of the process.
///
/// A call hands one job to every idle helper it wants, works on the job itself, and waits for the helpers that
/// took it. The job is a shared counter of pieces: each participant takes the next piece until none are left, so
/// the work balances itself (a helper that wakes late, or a core held up in a system call, just takes fewer
/// pieces), and a helper that never woke is simply withdrawn.
///
/// Why not `DispatchQueue.concurrentPerform`: it wakes a pool thread for every call and joins it at the end, and
/// waking an idle vCPU in a VM costs tens of microseconds, a tenth of the work of a 1 MiB call. A helper here spins for
/// `idleSpin` after each job before it sleeps on a futex, so back-to-back batches find it awake, and an idle
/// process costs nothing.
///
/// A helper busy with another caller's job is not waited for: that caller's work runs on the calling thread alone,
/// so concurrent callers never queue behind each other. In a child created by `fork()` (which has no helper
/// threads) every call runs on the calling thread.
final class ChunkWorkers: @unchecked Sendable {  // `workers` is fixed after init; each worker's fields are ordered by its atomic word
    static let shared = ChunkWorkers()

    /// How long a helper stays awake after a job, waiting for the next one.
    static let idleSpin: UInt64 = 200_000  // ns
    /// How long a caller spins for a helper to finish its last piece before sleeping.
    static let joinSpin: UInt64 = 500_000  // ns

    private let workers: [Worker]

    private init() {
        _ = forkedChild  // initialised before the fork handler can run
        pthread_atfork(nil, nil, { AtomicWord32(forkedChild).store(1) })
        workers = (0..<max(0, ChunkParallelism.cores - 1)).compactMap { _ in Worker.start() }
    }

    /// Runs `piece(0..<pieces)` on the calling thread and up to `helpers` helper threads; each index runs once.
    /// - Throws: the error of the lowest failing piece (no new piece starts after a failure).
    func run<E: Error>(pieces: Int, helpers: Int, _ piece: (Int) throws(E) -> Void) throws(E) {
        var claimed: [Worker] = []
        if AtomicWord32(forkedChild).load() == 0 {
            for w in workers where claimed.count < helpers && w.claim() { claimed.append(w) }
        }
        guard !claimed.isEmpty else {
            for p in 0..<pieces { try piece(p) }
            return
        }
        let participants = claimed.count + 1
        let next = UnsafeMutablePointer<UInt64>.allocate(capacity: 1)
        next.initialize(to: 0)
        // One slot per participant for its first failure; each participant writes only its own.
        let failures = UnsafeMutablePointer<(Int, E)?>.allocate(capacity: participants)
        failures.initialize(repeating: nil, count: participants)
        defer {
            failures.deinitialize(count: participants)
            failures.deallocate()
            next.deallocate()
        }
        withoutActuallyEscaping(piece) { piece in
            // Helpers run `piece` only between `publish` and `join`, both inside this closure.
            nonisolated(unsafe) let piece = piece
            nonisolated(unsafe) let next = next, failures = failures
            let job: (Int) -> Void = { slot in
                while case let p = Int(truncatingIfNeeded: AtomicWord64(next).fetchAdd(1)), p < pieces {
                    do throws(E) { try piece(p) } catch {
                        failures[slot] = (p, error)
                        AtomicWord64(next).fetchAdd(UInt64(pieces))  // past the end: no new pieces
                        return
                    }
                }
            }
            for (k, w) in claimed.enumerated() { w.publish(job, slot: k + 1) }
            job(0)
            for w in claimed { w.join() }
        }
        var first: (Int, E)?
        for s in 0..<participants { if let f = failures[s], first == nil || f.0 < first!.0 { first = f } }
        if let first { throw first.1 }
    }

    /// One helper thread and its hand-off word.
    final class Worker: @unchecked Sendable {  // `job` and `slot` are written by the claiming caller before `.ready`, read by the thread after
        /// [0]: the state (below); [1]: threads asleep on [0].
        private let word: UnsafeMutablePointer<UInt32>
        private var job: ((Int) -> Void)?
        private var slot = 0

        private static let idle: UInt32 = 0, claimed: UInt32 = 1, ready: UInt32 = 2, running: UInt32 = 3, done: UInt32 = 4

        private init() {
            word = .allocate(capacity: 2)
            word.initialize(repeating: 0, count: 2)
        }

        /// A worker with its thread running, or nil if the thread cannot be created (the caller then works alone).
        static func start() -> Worker? {
            let w = Worker()
            var attr = pthread_attr_t()
            pthread_attr_init(&attr)
            defer { pthread_attr_destroy(&attr) }
            pthread_attr_setdetachstate(&attr, Int32(PTHREAD_CREATE_DETACHED))
            var thread = pthread_t()
            let arg = Unmanaged.passRetained(w).toOpaque()  // the thread owns one reference for ever
            let rc = pthread_create(&thread, &attr, { arg in
                Unmanaged<Worker>.fromOpaque(arg!).takeUnretainedValue().loop()
            }, arg)
            guard rc == 0 else {
                Unmanaged<Worker>.fromOpaque(arg).release()
                return nil
            }
            return w
        }

        /// Takes the worker for one job if it is idle.
        func claim() -> Bool { AtomicWord32(word).compareExchange(expected: Self.idle, desired: Self.claimed) }

        func publish(_ job: @escaping (Int) -> Void, slot: Int) {
            self.job = job
            self.slot = slot
            set(Self.ready)
        }

        /// Waits for the job to end (or withdraws it if the thread has not taken it yet) and frees the worker.
        func join() {
            if !AtomicWord32(word).compareExchange(expected: Self.ready, desired: Self.claimed) { wait(for: Self.done, spin: ChunkWorkers.joinSpin) }
            job = nil
            AtomicWord32(word).store(Self.idle)  // nobody waits for idle: no wake-up
        }

        private func loop() -> Never {
            Processor.nameCurrentThread("dp-chunk-worker")
            while true {
                wait(for: Self.ready, spin: ChunkWorkers.idleSpin)
                guard AtomicWord32(word).compareExchange(expected: Self.ready, desired: Self.running) else { continue }  // withdrawn
                runJob()
                set(Self.done)
            }
        }

        /// Calls the job; its reference is released when this returns, before `.done` lets the caller go on.
        @inline(never)
        private func runJob() { job!(slot) }

        private func set(_ state: UInt32) {
            AtomicWord32(word).store(state)
            if AtomicWord32(word + 1).load() != 0 { AtomicWord32(word).wakeAll() }
        }

        /// Spins until the state is `want`, for at most `spin` ns, then sleeps on the futex until it is.
        private func wait(for want: UInt32, spin: UInt64) {
            var start: UInt64 = 0
            var polls = 0
            while true {
                let seen = AtomicWord32(word).load()
                if seen == want { return }
                polls += 1
                if polls & 63 == 0 {
                    let now = Processor.monotonicNanoseconds()
                    if start == 0 { start = now } else if now &- start > spin {
                        AtomicWord32(word + 1).fetchAdd(1)
                        AtomicWord32(word).wait(whileEqualTo: seen)  // returns at once if the state already moved on
                        AtomicWord32(word + 1).fetchAdd(UInt32.max)
                        continue
                    }
                }
                Processor.relax()
            }
        }
    }
}

/// Set in a child of `fork()`, which has no helper threads.
private nonisolated(unsafe) let forkedChild: UnsafeMutablePointer<UInt32> = {
    let p = UnsafeMutablePointer<UInt32>.allocate(capacity: 1)
    p.initialize(to: 0)
    return p
}()
