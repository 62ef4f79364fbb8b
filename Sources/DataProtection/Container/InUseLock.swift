import SystemLayer
internal import CShims

#if canImport(Glibc)
import Glibc
#endif
import Locking

/// The container's in-use lock: an OFD lock on `.container.lock` at the container root.
///
/// A process that opens a `Container` holds it shared for as long as the
/// container is open; `purge` takes it exclusive, so it never runs while any
/// process (on any host that honours OFD locks) uses the container. The kernel
/// drops the lock when the process dies, so a crash never leaves it stuck.
final class InUseLock: Sendable {
    static let fileName = ".container.lock"
    private let fd: Locked<Int32>

    private init(fd: Int32) { self.fd = Locked(fd) }

    deinit { release() }

    /// Takes the lock shared, waiting while a purge holds it exclusive.
    ///
    /// - Parameter exclusiveFirst: run with the lock held exclusive when no other process holds it
    ///   (clearing tmp at launch), then downgrade to shared atomically; skipped when others hold it.
    static func shared(_ confinement: Confinement, exclusiveFirst: (() throws(ProtectionError) -> Void)? = nil) throws(ProtectionError) -> InUseLock {
        let fd = try openLockFile(confinement)
        let lock = InUseLock(fd: fd)
        if let exclusiveFirst, dp_fcntl_lock(fd, dp_F_OFD_SETLK, Int16(F_WRLCK), Int16(SEEK_SET), 0, 1, nil) == 0 {
            try exclusiveFirst()
        }
        while dp_fcntl_lock(fd, dp_F_OFD_SETLKW, Int16(F_RDLCK), Int16(SEEK_SET), 0, 1, nil) != 0 {
            guard errno == EINTR else { throw .errno(errno, "lock", confinement.root + "/" + fileName) }
        }
        return lock
    }

    /// Takes the lock exclusive; nil when another process holds it and `wait` is false.
    static func exclusive(_ confinement: Confinement, wait: Bool) throws(ProtectionError) -> InUseLock? {
        let fd = try openLockFile(confinement)
        let lock = InUseLock(fd: fd)
        while dp_fcntl_lock(fd, wait ? dp_F_OFD_SETLKW : dp_F_OFD_SETLK, Int16(F_WRLCK), Int16(SEEK_SET), 0, 1, nil) != 0 {
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EACCES { return nil }
            throw .errno(errno, "lock", confinement.root + "/" + fileName)
        }
        return lock
    }

    /// Whether some process holds the container in use (a probe; takes nothing).
    static func isHeld(_ confinement: Confinement) throws(ProtectionError) -> Bool {
        let fd = try openLockFile(confinement)
        defer { Glibc.close(fd) }
        var pid: Int32 = 0
        guard dp_fcntl_lock(fd, dp_F_OFD_GETLK, Int16(F_WRLCK), Int16(SEEK_SET), 0, 1, &pid) == 0 else {
            throw .errno(errno, "probe", confinement.root + "/" + fileName)
        }
        return pid != 0
    }

    /// Runs `body` with the held lock upgraded to exclusive, then back to shared; false (body not run) when another process holds it.
    func withExclusive(_ body: () throws(ProtectionError) -> Void) throws(ProtectionError) -> Bool {
        let fd = self.fd.withLock { $0 }
        guard fd >= 0 else { throw ProtectionError(.badHandle, "the container was closed; open it again") }
        guard dp_fcntl_lock(fd, dp_F_OFD_SETLK, Int16(F_WRLCK), Int16(SEEK_SET), 0, 1, nil) == 0 else { return false }
        defer { _ = dp_fcntl_lock(fd, dp_F_OFD_SETLK, Int16(F_RDLCK), Int16(SEEK_SET), 0, 1, nil) }
        try body()
        return true
    }

    /// Drops the lock (closing its descriptor); idempotent.
    func release() {
        fd.withLock { fd in
            if fd >= 0 { Glibc.close(fd) }
            fd = -1
        }
    }

    private static func openLockFile(_ confinement: Confinement) throws(ProtectionError) -> Int32 {
        do throws(SystemError) {
            return try confinement.open(fileName, flags: O_RDWR | O_CREAT | O_NOFOLLOW, mode: 0o600)
        } catch { throw confinement.failure(error.errno, "open the in-use lock", fileName) }
    }
}
