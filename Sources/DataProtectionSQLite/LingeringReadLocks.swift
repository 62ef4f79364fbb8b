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
/// Lock order: a lock's mutex in the index (`WALLockSlots`), then this list's (`sweepLater` runs holding the former); a
/// sweep takes the index's mutexes without this list's.
final class LingeringReadLocks: @unchecked Sendable {  // `indexes`, `started`, `unavailable`: only holding `mutex`
    /// The process's sweeper.
    static let process = LingeringReadLocks()

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let wake = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var indexes: [WALIndex.Shared] = []
    private var started = false
    /// The thread could not be started: no lock lingers in this process (each goes at once, as without this type).
    private var unavailable = false
    private let rounds = Atomic<Int>(0)

    /// How many rounds of sweeps the thread has made (tests tell by it whether a lock could have gone meanwhile).
    var sweeps: Int { rounds.load(ordering: .acquiring) }

    private init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(wake, nil)
    }

    /// Sweeps `index` from the next period on, starting the thread the first time; false when the thread cannot run
    /// (`pthread_create` failed, now or before), and the caller then lets its lock go at once: without a sweeper a lock
    /// would linger until the process closed the index, holding other processes' checkpoints back meanwhile.
    func sweepLater(_ index: WALIndex.Shared) -> Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        if !started && !unavailable {
            var thread = pthread_t()
            if pthread_create(&thread, nil, { _ in LingeringReadLocks.process.run() }, nil) == 0 {
                pthread_detach(thread)
                started = true
            } else {
                unavailable = true
            }
        }
        guard started else { return false }
        indexes.append(index)
        pthread_cond_signal(wake)
        return true
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
            // An index swept with locks still lingering is swept again; one that stops being swept here is handed over
            // again by its next lingering lock (`WALIndex.Shared.sweep` and its `swept`).
            let again = due.filter { $0.sweep() }
            rounds.add(1, ordering: .releasing)
            pthread_mutex_lock(mutex)
            indexes += again
            pthread_mutex_unlock(mutex)
        }
    }
}
