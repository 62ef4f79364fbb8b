// Open file descriptions of the domain lock file, one per coordination in flight.
internal import SystemLayer
internal import Glibc
import Locking
import Synchronization

/// One open file description of the lock file, used by one outermost coordination at a time.
///
/// Each coordination in flight gets its own description, so the kernel excludes threads of this
/// process from each other exactly as it excludes other processes.
///
/// The descriptor is closed when its last user lets go: the coordination (or the pool) holds one
/// reference, and a kernel wait in progress holds another, so a wait abandoned at its deadline can
/// never close a descriptor number that the coordination is still using (or that was reused).
final class Lease: Sendable {
    let fd: Int32
    private let poisoned = Atomic<Bool>(false)
    private let references = Atomic<Int>(1)

    init(fd: Int32) { self.fd = fd }

    /// Marks the description as owned by an abandoned kernel wait; it must never be reused.
    func poison() { poisoned.store(true, ordering: .sequentiallyConsistent) }

    var isPoisoned: Bool { poisoned.load(ordering: .sequentiallyConsistent) }

    /// Adds a user (a kernel wait about to start).
    func retain() { references.add(1, ordering: .sequentiallyConsistent) }

    /// Drops a user; the last one closes the descriptor.
    func release() {
        if references.subtract(1, ordering: .sequentiallyConsistent).newValue == 0 { SystemFileIO().close(fd) }
    }
}

/// A small process-wide pool of lock-file descriptions for one domain.
final class LeasePool: Sendable {
    private let path: String
    private let idle = Locked<[Lease]>([])
    private static let keepIdle = 32

    init(lockFilePath: String) { self.path = lockFilePath }

    /// Takes an idle description or opens a new one.
    /// - Throws: `CoordinationError.lockDirectoryUnavailable` when the lock file cannot be opened.
    func checkout() throws(CoordinationError) -> Lease {
        if let lease = idle.withLock({ $0.popLast() }) { return lease }
        do throws(SystemError) {
            return Lease(fd: try SystemFileIO().open(path, flags: O_RDWR | O_CREAT | O_NOFOLLOW, mode: 0o666))  // O_CLOEXEC: always added; never through a planted link
        } catch {
            throw CoordinationError(
                .lockDirectoryUnavailable, path: path,
                message: "cannot open the lock file '\(path)'; check that its directory exists and is writable",
                errno: error.errno)
        }
    }

    /// Releases every lock of the lease and returns it to the pool (unless an abandoned wait owns it).
    func checkin(_ lease: Lease) {
        OFDLock.unlockAll(fd: lease.fd)
        let kept = !lease.isPoisoned && idle.withLock { idle -> Bool in
            guard idle.count < Self.keepIdle else { return false }
            idle.append(lease)
            return true
        }
        if !kept { lease.release() }
    }
}
