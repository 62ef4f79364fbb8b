import DataProtectionKeys
import SystemLayer
import ProtectionCrypto

#if canImport(Glibc)
import Glibc
#endif

extension ProtectedFiles {
    /// Converts the ordinary file at `path` into a protected file of class `c`, atomically.
    ///
    /// The protected copy is written beside it, fsynced and renamed over it
    /// (see `write(contentsOf:to:protection:)`): a crash leaves the plain file
    /// or the protected one. The new file is mode 0600.
    /// - Returns: false (and changes nothing) when `path` is already protected.
    /// - Throws: `.locked`, `.notFound`, `.io`.
    @discardableResult
    public func protectInPlace(_ path: String, as c: ProtectionClass) throws(ProtectionError) -> Bool {
        do throws(ProtectionError) { _ = try info(path); return false } catch where error.code == .notProtected {}
        let fd: Int32
        do throws(SystemError) { fd = try io.open(path, flags: O_RDONLY, mode: 0) } catch { throw io.failure(error, "protect", path) }
        defer { io.close(fd) }
        try write(contentsOf: fd, to: path, protection: c, via: .filesProtect)
        return true
    }

    /// Converts the protected file at `path` back into an ordinary file holding its plaintext, atomically.
    ///
    /// Decrypts into a temporary file beside it (mode 0600), fsyncs, renames
    /// over `path` and fsyncs the directory. On any failure the protected file is untouched.
    /// - Throws: `.locked`, `.authenticationFailed` (nothing is replaced), `.notProtected`, `.io`.
    public func unprotectInPlace(_ path: String) throws(ProtectionError) {
        try coordinated(path, writing: true) { () throws(ProtectionError) in try unprotectNow(path) }
    }

    /// Decrypts into the one atomic replace's temporary file (AtomicReplace.swift) and commits it.
    private func unprotectNow(_ path: String) throws(ProtectionError) {
        let replace: AtomicReplace
        do throws(SystemError) { replace = try AtomicReplace(replacing: path, mode: 0o600, io: io) } catch { throw .replace(error, "unprotect", path, io: io) }
        defer { io.close(replace.fd) }  // the temporary file's lock goes with it, once its name is gone
        do throws(ProtectionError) {
            try read(path, into: replace.fd, via: .filesUnprotect)
            do throws(SystemError) { try replace.commit(syncingFile: true, syncingDirectory: true, keepingAttributes: false) } catch {
                throw ProtectionError.errno(error.errno, "unprotect", path)
            }
        } catch {
            replace.discard()
            throw error.about(path, "unprotect")
        }
    }
}
