import SystemLayer

#if canImport(Glibc)
import Glibc
#endif

/// Serialises the writers of one domain's kernel keys across processes: an exclusive OFD lock on `keys.lock` in the
/// domain's private runtime directory (the live lock's, mode 0700).
///
/// A domain key holds several classes, so `lock` (drop A and B), a rotation (add a generation) and a retire (drop old
/// ones) each read the payload, change it and write it back. Two such changes at once would lose one of them: a lock
/// racing a rotation could put back the class key it had just removed. Under this lock they happen one after
/// another. Readers take no lock: `keyctl_update` replaces a payload whole. The kernel drops the lock when its holder
/// dies, so a crashed writer never blocks the next one.
struct KeyStoreWriteLock: Sendable {
    let path: String
    private static let io = SystemFileIO()

    init(directory: String) { path = directory + "/keys.lock" }

    /// Runs `body` holding the lock (waiting for another writer).
    func hold<R>(_ body: () throws(ProtectionError) -> R) throws(ProtectionError) -> R {
        let fd = try open()
        defer { Self.io.close(fd) }  // closing the descriptor releases its OFD lock
        while true {
            switch OFDLock.waitSet(fd: fd, .exclusive, start: 0, length: 0) {
            case .done: return try body()
            case .failed(EINTR), .wouldBlock: continue
            case .failed(let code): throw .errno(code, "lock", path)
            }
        }
    }

    /// Opens the lock file, making it if it is absent; anything but a regular file of ours there is refused.
    private func open() throws(ProtectionError) -> Int32 {
        for _ in 0..<4 {
            do throws(OwnedFileFailure) { return try Self.io.openOwned(path, flags: O_RDWR) } catch {
                guard case .system(let e) = error, e.errno == ENOENT else { throw refusal(error) }
            }
            do throws(OwnedFileFailure) { return try Self.io.createOwned(path, flags: O_RDWR, mode: 0o600) } catch {
                guard case .system(let e) = error, e.errno == EEXIST else { throw refusal(error) }  // made meanwhile: open it
            }
        }
        throw .errno(EAGAIN, "open the key-store lock", path)
    }

    private func refusal(_ failure: OwnedFileFailure) -> ProtectionError {
        switch failure {
        case .system(let e): .errno(e.errno, "open the key-store lock", path)
        case .foreign(let what):
            ProtectionError(.io(EPERM), "unable to use the key-store lock '\(path)': it is \(what), not a lock file of yours; remove it and retry", path: path)
        }
    }
}
