import DataProtectionKeys
import DataProtectionFiles
import SystemLayer

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
    private let io: any FileIO

    private init(fd: Int32, io: any FileIO) {
        self.fd = Locked(fd)
        self.io = io
    }

    deinit { release() }

    /// Takes the lock shared, waiting while a purge holds it exclusive.
    ///
    /// - Parameter exclusiveFirst: run with the lock held exclusive when no other process holds it
    ///   (clearing tmp at launch), then downgrade to shared atomically; skipped when others hold it.
    static func shared(_ confinement: Confinement, exclusiveFirst: (() throws(ProtectionError) -> Void)? = nil) throws(ProtectionError) -> InUseLock {
        let fd = try openLockFile(confinement)
        let lock = InUseLock(fd: fd, io: confinement.io)
        if let exclusiveFirst, OFDLock.trySet(fd: fd, .exclusive, start: 0, length: 1) == .done {
            try exclusiveFirst()
        }
        switch OFDLock.waitSet(fd: fd, .shared, start: 0, length: 1) {  // retries EINTR
        case .done: return lock
        case .wouldBlock: throw .errno(EAGAIN, "lock", confinement.root + "/" + fileName)
        case .failed(let code): throw .errno(code, "lock", confinement.root + "/" + fileName)
        }
    }

    /// Takes the lock exclusive; nil when another process holds it and `wait` is false.
    static func exclusive(_ confinement: Confinement, wait: Bool) throws(ProtectionError) -> InUseLock? {
        let fd = try openLockFile(confinement)
        let lock = InUseLock(fd: fd, io: confinement.io)
        while true {
            switch wait ? OFDLock.waitSet(fd: fd, .exclusive, start: 0, length: 1) : OFDLock.trySet(fd: fd, .exclusive, start: 0, length: 1) {
            case .done: return lock
            case .wouldBlock: return nil
            case .failed(EINTR): continue
            case .failed(let code): throw .errno(code, "lock", confinement.root + "/" + fileName)
            }
        }
    }

    /// Whether some process holds the container in use (a probe; takes nothing).
    static func isHeld(_ confinement: Confinement) throws(ProtectionError) -> Bool {
        let fd = try openLockFile(confinement)
        defer { confinement.io.close(fd) }
        switch OFDLock.isLocked(fd: fd, .exclusive, start: 0, length: 1) {
        case .done: return false
        case .wouldBlock: return true
        case .failed(let code): throw .errno(code, "probe", confinement.root + "/" + fileName)
        }
    }

    /// Runs `body` with the held lock upgraded to exclusive, then back to shared; false (body not run) when another process holds it.
    func withExclusive(_ body: () throws(ProtectionError) -> Void) throws(ProtectionError) -> Bool {
        let fd = self.fd.withLock { $0 }
        guard fd >= 0 else { throw ProtectionError(.badHandle, "the container was closed; open it again") }
        guard OFDLock.trySet(fd: fd, .exclusive, start: 0, length: 1) == .done else { return false }
        defer { _ = OFDLock.trySet(fd: fd, .shared, start: 0, length: 1) }
        try body()
        return true
    }

    /// Drops the lock (closing its descriptor); idempotent.
    func release() {
        fd.withLock { fd in
            if fd >= 0 { io.close(fd) }
            fd = -1
        }
    }

    private static func openLockFile(_ confinement: Confinement) throws(ProtectionError) -> Int32 {
        do throws(SystemError) {
            return try confinement.open(fileName, flags: O_RDWR | O_CREAT | O_NOFOLLOW, mode: 0o600)
        } catch { throw confinement.failure(error.errno, "open the in-use lock", fileName) }
    }
}
