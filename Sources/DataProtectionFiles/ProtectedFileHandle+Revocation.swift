import DataProtectionKeys
import DataProtectionFormat
import SystemLayer
import ProtectionCrypto
import Locking

#if canImport(Glibc)
import Glibc
#endif

/// How a lock reaches an open handle: `revoke` drops its keys and staged plaintext under its lock, and every
/// operation starts with `live`, which checks the lock state and, after an unlock, admits keys again.
extension ProtectedFileHandle {
    /// Withdraws the handle's keys if its class is now locked (`KeyHolder`): later calls throw `.locked`.
    ///
    /// The descriptor stays open so `close()` behaves as usual; the keys are
    /// dropped here, under the handle's lock, so no operation is half done.
    package func revoke(where locked: (ProtectionClass) -> Bool) {
        guard locked(protectionClass) else { return }
        state.withLock { st in Self.drop(&st, .locked(protectionClass)) }
    }

    /// Commits the handle and wipes its keys for good at shutdown (`KeyHolder`): later calls throw `error` (`.shuttingDown`).
    ///
    /// Under the handle's lock, so a write in progress finishes (or fails and leaves its journal to roll it back)
    /// first. A journaled handle (a writable one on the file's real name) is then closed as `close()` closes it: its
    /// journal committed and removed, its descriptors closed, its keys and staged plaintext wiped. Any other handle has
    /// its keys and staged plaintext wiped and keeps its descriptor for the owner's `close()`: a handle filling an
    /// atomic replace shares its descriptor with the replace, whose lock and discard must not lose it mid-operation
    /// (that replace then fails `.shuttingDown` at its next step and removes its temporary file; the old file stays).
    package func retire(_ error: ProtectionError) {
        state.withLock { st in
            if st.journal != nil { finish(&st) }
            Self.drop(&st, error)
        }
    }

    /// Drops the keys and the staged plaintext; later calls throw `error` (until an unlock, for `.locked`).
    static func drop(_ st: inout State, _ error: ProtectionError) {
        st.sealer = nil
        st.revokedBy = error
        st.dropPlaintext()
    }

    /// The keys for the next operation, after the lock check (one atomic load when attached to a live lock).
    ///
    /// If the domain locked since the keys were obtained and this class locks
    /// with it, the keys are dropped (wiped) and `.locked` is thrown. A handle
    /// whose keys were dropped gets them again from the key provider once the
    /// class is unlocked, so work resumes on the same handle.
    ///
    /// The check never applies a lock itself (that would revoke this very handle, whose lock is held here): a passed
    /// auto-lock deadline counts as locked (`Revocation.revokes`), and the listener applies it.
    @inline(__always)
    func live(_ st: inout State, _ action: String) throws(ProtectionError) -> ChunkSealer {
        let r = files.revocation
        let e = r.epoch
        let revoked = r.revokes(protectionClass)
        if revoked {
            Self.drop(&st, .locked(protectionClass))
        } else if e != st.epoch, st.sealer != nil {
            st.epoch = e
        }
        if st.sealer == nil, st.fd >= 0, st.revokedBy?.code == .locked, !revoked {
            do throws(ProtectionError) {
                // Keys again after an unlock: through the same admission as an open, so a lock cannot miss them.
                try files.keys.admit(protectionClass, via: entryPoint) { (access, epoch) throws(ProtectionError) in
                    st.sealer = ChunkSealer(fileID: header.fileID, keys: try files.fileKeys(for: header, access))
                    st.revokedBy = nil
                    st.epoch = epoch
                }
            } catch { throw error.about(path, action) }
        }
        if let s = st.sealer { return s }
        if let e = st.revokedBy {
            if e.code == .locked { files.revocation.telemetry.metrics.lockedErrors[protectionClass].increment() }  // error path only
            throw e.about(path, action)
        }
        throw ProtectionError(.badHandle, "unable to \(action) '\(path)': the handle is closed; open the file again", path: path)
    }
}
