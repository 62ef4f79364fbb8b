import DataProtectionKeys
import DataProtectionFormat
import SystemLayer
import ProtectionCrypto

#if canImport(Glibc)
import Glibc
#endif

/// What `rewrap` did to one file.
public enum RewrapOutcome: Sendable, Equatable {
    /// The header was rewritten; the file was of this class and generation before.
    case rewrapped(from: ProtectionClass, generation: UInt32)
    /// The file already had the requested class and generation.
    case unchanged
}

extension ProtectedFiles {
    /// Rewraps the per-file key of `path` for class `c`, generation `generation`, rewriting only its 176-byte header.
    ///
    /// Unwraps the per-file key with the old class key, checks the header MAC,
    /// wraps the key with the new class key (the fixed fields, now naming the
    /// new class and generation, are the wrap's associated data), recomputes the
    /// header MAC, writes the header in place with one `pwrite` and fsyncs. The
    /// contents are not re-encrypted: chunk associated data does not name the
    /// class, so the chunks stay valid. The header is one 176-byte write at
    /// offset 0, inside a single disk sector, so a crash leaves the old header or the new.
    ///
    /// - Parameters:
    ///   - path: a protected file.
    ///   - c: the class to wrap for.
    ///   - generation: the class-key generation; default: the provider's current one.
    ///   - sync: fsync the file before returning; a caller that rewraps many files
    ///     may pass false and make them durable together (`syncfs`), as rotation does.
    /// - Throws: `.locked` when the old class key (or, for A and C, the new one) is
    ///   unavailable; `.authenticationFailed` for a header that does not authenticate;
    ///   `.notProtected`, `.notFound`, `.io`.
    @discardableResult
    public func rewrap(_ path: String, to c: ProtectionClass, generation: UInt32? = nil, sync: Bool = true) throws(ProtectionError) -> RewrapOutcome {
        // A journal is bound to the header it was written against (FORMAT.md §6.7): a dead writer's change is
        // finished first, and the header changes only while this holds the journal's lock, so no writer's journal
        // outlives the header it names.
        do throws(ProtectionError) {
            if try JournalRecoverer(io: io, dataPath: path).run() == .inUse {
                throw ProtectionError(
                    .coordinationFailed, "another handle is writing it; close that handle (or coordinate with a FileCoordinator) and try again", path: nil)
            }
        } catch { throw error.about(path, "rewrap") }
        let fd: Int32
        do throws(SystemError) { fd = try io.open(path, flags: O_RDWR, mode: 0) } catch { throw io.failure(error, "rewrap", path) }
        defer { io.close(fd) }
        do throws(ProtectionError) {
            var (header, _, raw) = try readPrefix(fd, path)
            let g: UInt32
            if let generation { g = generation } else { g = try keys.currentGeneration(of: c) }
            if header.protectionClass == c && header.classKeyGeneration == g { return .unchanged }
            let old = (header.protectionClass, header.classKeyGeneration)
            // The per-file key lives only inside one admission for both classes, so a lock of either waits for it and
            // finds it gone: it is wiped when this block returns.
            try keys.admit(old.0, also: c, via: .filesRewrap) { (access, _) throws(ProtectionError) in
                let fileKey = try unwrapFileKey(header, raw: raw, access)
                AdmissionPoint.keysObtained(old.0)
                let fk = try crypto { () throws(CryptoError) in try FileKeys(fileKey: fileKey, cipher: header.cipher) }
                try checkMAC(raw: raw, fk)
                header.protectionClass = c
                header.classKeyGeneration = g
                header.wrappedKey = [UInt8](repeating: 0, count: FileHeader.wrappedKeyLength(for: c))
                let fixed = header.fixedBytes()
                header.wrappedKey = try fixed.span.bytes.withUnsafeBytes { (ad) throws(ProtectionError) in
                    try access.wrapFileKey(fileKey, for: c, generation: g, ad: ad)
                }
                guard header.wrappedKey.count == FileHeader.wrappedKeyLength(for: c) else {
                    throw ProtectionError(.invalidArgument, "the class key provider returned a wrapped key of \(header.wrappedKey.count) bytes for class \(c)")
                }
                header.mac = try crypto { () throws(CryptoError) in try fk.headerMAC(header) }
            }
            var journal = WriteJournal(dataPath: path)
            defer { journal.close(io) }  // also when taking the lock fails part way: no descriptor (or its lock) outlives the call
            try journal.lockForHeaderChange(io, dataHeader: Array(raw[0..<FileHeader.size]))
            do throws(SystemError) {
                try header.encoded().span.bytes.withUnsafeBytes { (b) throws(SystemError) in try io.writeFully(fd, from: b, at: 0) }
                if sync { try io.fsync(fd) }
            } catch { throw ProtectionError.errno(error.errno, "rewrap", path) }
            return .rewrapped(from: old.0, generation: old.1)
        } catch {
            throw error.about(path, "rewrap")
        }
    }

    /// The per-file key of `header`, unwrapped through the provider; `raw` is the header's
    /// 176 bytes (as read, or `header.encoded()`), whose fixed fields are the associated data.
    func unwrapFileKey(_ header: FileHeader, raw: [UInt8], _ access: borrowing KeyAccess) throws(ProtectionError) -> SecretBytes {
        try raw.span.bytes.withUnsafeBytes { (b) throws(ProtectionError) -> SecretBytes in
            try header.wrappedKey.span.bytes.withUnsafeBytes { (w) throws(ProtectionError) -> SecretBytes in
                try access.unwrapFileKey(w, for: header.protectionClass, generation: header.classKeyGeneration,
                                       ad: UnsafeRawBufferPointer(rebasing: b[0..<FileHeader.fixedSize]))
            }
        }
    }

    /// Verifies the header MAC over `raw` (the header's 176 bytes) in constant time.
    func checkMAC(raw: [UInt8], _ fk: FileKeys) throws(ProtectionError) {
        let ok = try raw.span.bytes.withUnsafeBytes { (b) throws(ProtectionError) -> Bool in
            let mac = try crypto { () throws(CryptoError) in try fk.headerMAC(of: b) }
            let stored = UnsafeRawBufferPointer(rebasing: b[(FileHeader.fixedSize + FileHeader.wrappedKeySlot)..<FileHeader.size])
            return mac.withUnsafeBytes { GenericHash.equal($0, stored) }
        }
        guard ok else {
            throw ProtectionError(.authenticationFailed, "the header failed authentication; it was altered; restore the file from a backup")
        }
    }
}
