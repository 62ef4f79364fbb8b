#if canImport(Glibc)
import Glibc
#endif

/// A value behind a `pthread_mutex_t`: `withLock` gives one thread at a time `inout` access.
///
/// The project's one lock type, used instead of `Synchronization.Mutex`: on Linux
/// that Mutex waits on a futex inside the precompiled standard library, where
/// ThreadSanitizer cannot see it, so every access it protects is reported as a
/// race. TSan intercepts `pthread_mutex_lock`, so with this lock the sanitizer
/// run sees the real ordering and reports only real races. Uncontended cost is
/// one `pthread_mutex_lock`/`unlock` pair (about 20 ns here).
public final class Locked<Value: ~Copyable>: @unchecked Sendable {  // every access to `value` holds `mutex`
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline var value: Value

    public init(_ initial: consuming Value) {
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        value = initial
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the lock held and the value in hand; not reentrant (a nested call on the same lock deadlocks).
    ///
    /// Inlinable so callers in other modules are specialized (no generic metadata looked up per call).
    @inlinable
    public func withLock<Result: ~Copyable, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
