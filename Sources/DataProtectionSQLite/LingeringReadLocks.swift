import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The one thread of a process that lets go of its wal-indexes' lingering read locks (`WALIndex.lingerPeriod`).
///
/// An index whose last holder of a read lock let it go is handed over once (`sweepLater`); the thread then sweeps it
/// every period until nothing lingers there (`WALIndex.Shared.sweep`): a lock let go or taken back since the last sweep
/// lingers on, any other goes. So a read lock stays at the file between one and two periods after its last use, and
/// another process waits at most that long for it. The thread sleeps on its condition while there is nothing to sweep.
///
/// Lock order: an index's state, then this list (`sweepLater` runs holding the state); a sweep takes the state without
/// this list's mutex.
final class LingeringReadLocks: @unchecked Sendable {  // `indexes` and `started` are reached only holding `mutex`
    /// The process's sweeper.
    static let process = LingeringReadLocks()

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let wake = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var indexes: [WALIndex.Shared] = []
    private var started = false
    private let rounds = Atomic<Int>(0)

    /// How many rounds of sweeps the thread has made (tests tell by it whether a lock could have gone meanwhile).
    var sweeps: Int { rounds.load(ordering: .acquiring) }

    private init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(wake, nil)
    }

    /// Sweeps `index` from the next period on, starting the thread the first time. Called holding the index's state.
    func sweepLater(_ index: WALIndex.Shared) {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        indexes.append(index)
        if !started {
            var thread = pthread_t()
            // Without a thread the locks would linger until the process closes the index: another process's checkpoint
            // would copy only up to their marks meanwhile. A process that cannot start one thread has worse troubles.
            guard pthread_create(&thread, nil, { _ in LingeringReadLocks.process.run() }, nil) == 0 else {
                fatalError("cannot start the thread that lets go of lingering wal-index read locks: \(String(cString: strerror(errno)))")
            }
            pthread_detach(thread)
            started = true
        }
        pthread_cond_signal(wake)
    }

    private func run() -> Never {
        let period = WALIndex.lingerPeriod.components
        let pause = timespec(tv_sec: Int(period.seconds), tv_nsec: Int(period.attoseconds / 1_000_000_000))
        while true {
            pthread_mutex_lock(mutex)
            while indexes.isEmpty { pthread_cond_wait(wake, mutex) }
            pthread_mutex_unlock(mutex)
            var asked = pause, left = timespec()
            while nanosleep(&asked, &left) != 0 && errno == EINTR { asked = left }
            pthread_mutex_lock(mutex)
            let due = indexes
            indexes = []
            pthread_mutex_unlock(mutex)
            // An index swept with locks still lingering is swept again; `sweep` sets its `swept` as it decides, holding
            // its state, so an index that stops being swept here is handed over again by its next lingering lock.
            let again = due.filter { $0.sweep() }
            rounds.add(1, ordering: .releasing)
            pthread_mutex_lock(mutex)
            indexes += again
            pthread_mutex_unlock(mutex)
        }
    }
}
