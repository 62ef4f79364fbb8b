#if canImport(Glibc)
import Glibc
#endif

/// A readers–writer gate over `pthread_rwlock_t`: many `shared` sections at once, or one `exclusive`.
///
/// Writer-preferring (`PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP`): once an exclusive section waits,
/// new shared sections wait behind it, so a stream of readers cannot starve it. Not reentrant: a thread
/// must not enter a section of the same gate again before leaving the first. ThreadSanitizer intercepts
/// `pthread_rwlock_*`, as it does the mutex behind `Locked`.
public final class ReadWriteGate: @unchecked Sendable {  // the rwlock is the only state
    @usableFromInline let lock: UnsafeMutablePointer<pthread_rwlock_t>

    public init() {
        lock = .allocate(capacity: 1)
        var attr = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attr)
        pthread_rwlockattr_setkind_np(&attr, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
        pthread_rwlock_init(lock, &attr)
        pthread_rwlockattr_destroy(&attr)
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    /// Runs `body` while no exclusive section runs (other shared sections may).
    ///
    /// Inlinable so callers in other modules are specialized (no generic metadata looked up per call).
    @inlinable
    public func shared<R: ~Copyable, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }

    /// Runs `body` while no other section, shared or exclusive, runs.
    @inlinable
    public func exclusive<R: ~Copyable, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }
}
