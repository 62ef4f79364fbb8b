import SystemLayer
import ProtectionCrypto
import Locking

#if canImport(Glibc)
import Glibc
#endif

/// The domain's keybag as last read, re-read when the file changes (another process rotated or recovered).
///
/// Holds only public parts, and class B's public keys and the `none` class keys, which are always
/// available (the device secret alone unwraps them).
///
/// Whether the file changed is asked on every use (every protected open and create), so it must be cheap: the
/// cache keeps a descriptor of the file it read and `fstat`s it (about 0.3 µs here) instead of looking the path up
/// again (`stat` of the path: about 2 µs, five directories deep).
package final class KeybagCache: Sendable {
    let location: DomainLocation
    let io: any FileIO
    private struct State: @unchecked Sendable {
        var watch: KeybagWatch?; var bag: Keybag; var none: [UInt32: ClassKey]; var publicKeys: [UInt32: X25519PublicKey] = [:]
        /// +1 each time the keybag is replaced here (read anew, or written by this process): what `ClassKeyCache` entries are bound to.
        var version: UInt64 = 0
    }
    private let state: Locked<State>

    package init(_ location: DomainLocation, io: any FileIO, bag: Keybag) {
        self.location = location
        self.io = io
        self.state = Locked(State(watch: KeybagWatch(location.keybagPath), bag: bag, none: [:]))
    }

    /// The current keybag, re-read first if the file changed since.
    package func bag() throws(ProtectionError) -> Keybag { try current().bag }

    /// The current keybag (re-read first if the file changed since) and its version: a new one each time it was replaced.
    func current() throws(ProtectionError) -> (bag: Keybag, version: UInt64) {
        let (watch, cached, version) = state.withLock { ($0.watch, $0.bag, $0.version) }
        if let watch, watch.isUnchanged { return (cached, version) }
        let fresh = KeybagWatch(location.keybagPath)  // before the read: a change after it is seen next time
        let bag = try Keybag.load(location, io: io) { (c) throws(ProtectionError) in try DeviceSecret.load(for: c, at: location, io: io) }
        return (bag, replace(with: bag, watch: fresh))
    }

    /// Replaces the cached keybag after this process wrote it.
    package func update(_ bag: Keybag) { replace(with: bag, watch: KeybagWatch(location.keybagPath)) }

    /// Installs `bag` as the current keybag, forgetting what was derived from the old one; returns its version.
    private func replace(with bag: Keybag, watch: KeybagWatch?) -> UInt64 {
        state.withLock {
            $0 = State(watch: watch, bag: bag, none: [:], version: $0.version &+ 1)
            return $0.version
        }
    }

    /// Generation `g` of class `none`, unwrapped with the device secret once and kept (it is never locked).
    func noneKey(_ g: UInt32) throws(ProtectionError) -> ClassKey? {
        let bag = try bag()
        if let k = state.withLock({ $0.none[g] }) { return k }
        let device = try DeviceSecret.load(for: bag.contents, at: location, io: io)
        guard let k = try bag.unwrapNone(g, device) else { return nil }
        state.withLock { $0.none[g] = k }
        return k
    }

    /// The public key of generation `g` of class B, unwrapped with the device secret once and kept (it is needed while locked).
    func publicKey(_ c: ProtectionClass, _ g: UInt32) throws(ProtectionError) -> X25519PublicKey? {
        let bag = try bag()
        if let k = state.withLock({ $0.publicKeys[g] }) { return k }
        let device = try DeviceSecret.load(for: bag.contents, at: location, io: io)
        guard let k = try bag.publicKey(c, g, device) else { return nil }
        state.withLock { $0.publicKeys[g] = k }
        return k
    }
}

/// An open descriptor of the keybag file, and its size and times when opened: whether the file at the keybag's
/// path is still that file, unchanged, without looking the path up.
///
/// The keybag is only ever replaced whole (written beside it, renamed over it). Replacing drops the old file's
/// link, and unlinking sets its change time, so a replaced keybag shows as unlinked or changed even while another
/// name (a hard link kept as a backup) still holds it; writing in place would change its size or times.
final class KeybagWatch: Sendable {
    private struct Stamp: Equatable { var size: Int64; var mtime: timespec; var ctime: timespec
        static func == (a: Stamp, b: Stamp) -> Bool {
            a.size == b.size && a.mtime.tv_sec == b.mtime.tv_sec && a.mtime.tv_nsec == b.mtime.tv_nsec && a.ctime.tv_sec == b.ctime.tv_sec && a.ctime.tv_nsec == b.ctime.tv_nsec
        }
    }
    private let fd: Int32
    private let stamp: Stamp
    /// The real calls, not a domain's seam: a watch that cannot open or examine the file only makes the next use re-read it.
    private static let io = SystemFileIO()

    /// Nil when the file cannot be opened (there is no keybag, or it cannot be read): every use then re-reads it.
    init?(_ path: String) {
        guard let fd = try? Self.io.open(path, flags: O_RDONLY, mode: 0) else { return nil }
        guard let s = Self.stamp(fd) else {
            Self.io.close(fd)
            return nil
        }
        self.fd = fd
        self.stamp = s
    }

    deinit { Self.io.close(fd) }

    var isUnchanged: Bool { Self.stamp(fd) == stamp }

    /// Nil when the file has no link left (it was replaced or removed) or cannot be examined.
    private static func stamp(_ fd: Int32) -> Stamp? {
        guard let st = try? io.fullStatus(fd), st.st_nlink > 0 else { return nil }
        return Stamp(size: Int64(st.st_size), mtime: st.st_mtim, ctime: st.st_ctim)
    }
}

/// The `ClassKeyProvider` of a protection domain: public parts from the keybag, secret halves from the key store.
///
/// Classes A and C wrap and unwrap with the secret from the store (the kernel
/// keyring, read once per live-lock epoch and kept in `ClassKeyCache`); class B seals to the public key the keybag
/// holds wrapped under the device secret, so it can create while locked, and opens with the private key from the
/// store; class `none` uses the key the device secret unwraps.
package final class DomainClassKeys: ClassKeyProvider {
    let cache: KeybagCache
    let store: any ClassKeyStore
    /// The secret halves read from `store`, kept while `liveLock`'s epoch stands; wiped by its revocation.
    let secrets: ClassKeyCache

    /// The domain's keys: public parts from `cache`, secret halves from `store`, kept between opens under `liveLock`
    /// (whose revocation wipes them on every lock).
    package init(cache: KeybagCache, store: any ClassKeyStore, liveLock: LiveLock) {
        self.cache = cache
        self.store = store
        secrets = ClassKeyCache(state: liveLock.state)
        liveLock.revocation.attach(cache: secrets)
    }

    package func currentGeneration(of c: ProtectionClass) throws(ProtectionError) -> UInt32 {
        guard let e = try cache.bag().contents.current(c) else { throw .locked(c) }
        return e.generation
    }

    package func wrapFileKey(_ fileKey: borrowing SecretBytes, for c: ProtectionClass, generation g: UInt32, ad: UnsafeRawBufferPointer) throws(ProtectionError) -> [UInt8] {
        try key(c, g, needSecret: !c.usesPublicKeySealing).wrap(fileKey, ad: ad)
    }

    package func unwrapFileKey(_ wrapped: UnsafeRawBufferPointer, for c: ProtectionClass, generation g: UInt32, ad: UnsafeRawBufferPointer) throws(ProtectionError) -> SecretBytes {
        try key(c, g, needSecret: true).unwrap(wrapped, ad: ad)
    }

    /// Generation `g` of `c`, with its secret half when `needSecret`.
    /// - Throws: `.locked` when the secret is not in the store; `unknownGeneration` when the keybag never had it.
    func key(_ c: ProtectionClass, _ g: UInt32, needSecret: Bool) throws(ProtectionError) -> ClassKey {
        if c == .none {
            guard let k = try cache.noneKey(g) else { throw .unknownGeneration(c, g) }
            return k
        }
        let (bag, version) = try cache.current()
        guard let entry = bag.contents.entry(c, g) else {
            // Unlocked but without this generation: the header names a key this domain never had.
            throw .unknownGeneration(c, g)
        }
        let pk = c.usesPublicKeySealing ? try cache.publicKey(c, entry.generation) : nil
        guard needSecret else { return ClassKey(c, generation: g, secret: nil, publicKey: pk) }
        let k = try secrets.key(c, g, keybag: version) { () throws(ProtectionError) -> ClassKey? in
            guard let s = try store.secret(c, g) else { return nil }
            return ClassKey(c, generation: g, secret: SharedSecret(s), publicKey: pk)
        }
        guard let k else { throw .locked(c) }
        return k
    }
}
