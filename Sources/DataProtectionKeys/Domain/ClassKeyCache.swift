import ProtectionCrypto
import Locking

/// This process's copies of unlocked class keys between opens, good only while the live lock's epoch, the class's
/// lock state and the keybag stay what they were when each key was fetched.
///
/// Without it every open of a class A, B or C file reads the class key from the key store: a `keyctl_read` (about
/// 1.1 µs of kernel time) into a pooled locked-memory slot, and a `SharedSecret` and a `ClassKey` around it. With it
/// the second open of the same class and generation costs one shared-page comparison.
///
/// Why this keeps every guarantee of the keyring-only design:
/// - An entry is handed out only inside an admission (`ClassKeys.admit`, the revocation's gate held shared), and only
///   if the shared page's epoch is still the one read *before* the key was fetched, the page does not mark the class
///   locked (nor a passed auto-lock deadline), and the keybag is the one read then. Every lock, from any process,
///   marks its classes and advances the epoch before it destroys the keys, so from the moment a lock starts no
///   admission anywhere uses an entry from before it. The check is two or three loads from the shared page: no
///   system call.
/// - The entries are wiped by the mechanism that wipes handles: `Revocation.revokeLocked` runs `revoke(where:)` under
///   the gate held exclusively, on the listener thread, before this process acknowledges the lock; `lock` returns
///   only after every attached process acknowledged. So when `lock` returns no attached process holds a copy. A
///   process whose listener is stuck keeps its copies unusable (the epoch) until it handles the message, as its
///   handles do. `Revocation.retire` (a service's shutdown) wipes them too.
/// - Every lock wipes every entry, whatever classes it locks (class C's key is simply read again): nothing here
///   depends on which classes a lock names.
/// - Wiping drops the last reference to each `ClassKey`: its `SecretBytes` slot is zeroed as it goes (no admission
///   is in flight then, so nothing else holds one).
/// - A key removed from the keyring by other means than the live lock (`keyctl invalidate` by hand, the end of the
///   session keyring that held it) is still used by this process until its next lock: the live lock is the one lock
///   mechanism (SECURITY.md, "Class keys in each process").
final class ClassKeyCache: KeyHolder {
    private struct Entry {
        let key: ClassKey
        /// The live lock's epoch read before the key was fetched.
        let epoch: UInt64
        /// `KeybagCache`'s version of the keybag the key was fetched under.
        let keybag: UInt64
    }

    private let state: LiveState
    /// A handful at most: one per class and live generation (a rotation adds one until its old generation retires).
    private let entries = Locked<[Entry]>([])

    init(state: LiveState) { self.state = state }

    /// The secret half of generation `g` of `c`: the cached key while it is still good, else `fetch()`'s, kept.
    ///
    /// Call only inside an admission (`ClassKeys.admit`): that is what orders an insert before a lock's wipe.
    /// - Parameters:
    ///   - keybag: the version of the keybag `fetch` reads under (`KeybagCache.current`).
    ///   - fetch: reads the key from the store; nil when it is not there (locked).
    /// - Returns: nil when the store does not have the key.
    func key(_ c: ProtectionClass, _ g: UInt32, keybag: UInt64, fetch: () throws(ProtectionError) -> ClassKey?) throws(ProtectionError) -> ClassKey? {
        let epoch = state.epoch  // before the fetch: a lock after this load makes the entry stale
        let refused = state.refusesKey(c)
        if !refused, let k = entries.withLock({ list in
            list.first { $0.key.protectionClass == c && $0.key.generation == g && $0.epoch == epoch && $0.keybag == keybag }?.key
        }) {
            return k
        }
        guard let k = try fetch() else { return nil }
        // A class the page marks locked is not kept, even if its key was still in the store a moment ago.
        // Entries of an older keybag go (a rotation retired their generation); entries of an older epoch are left to
        // the lock's wipe, the one mechanism that ends them (the residue test sees it work).
        if !refused {
            entries.withLock { list in
                list.removeAll { ($0.key.protectionClass == c && $0.key.generation == g) || $0.keybag != keybag }
                list.append(Entry(key: k, epoch: epoch, keybag: keybag))
            }
        }
        return k
    }

    /// Drops (and so zeroes) every cached key, whatever `locked` says: any lock ends every copy.
    func revoke(where locked: (ProtectionClass) -> Bool) { wipe() }

    /// Drops every cached key at shutdown.
    func retire(_ error: ProtectionError) { wipe() }

    /// Drops every cached key; each `ClassKey`'s secret zeroes itself as its last reference goes.
    func wipe() {
        let dropped = entries.withLock { list in
            let old = list
            list = []
            return old
        }
        _ = dropped  // released here, outside the lock
    }
}
