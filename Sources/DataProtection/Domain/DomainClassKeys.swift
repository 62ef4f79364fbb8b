import ProtectionCrypto
import Locking

#if canImport(Glibc)
import Glibc
#endif

/// The domain's keybag as last read, re-read when the file changes (another process rotated or recovered).
///
/// Holds only public parts and the `none` class keys, which are always
/// available (the device secret alone unwraps them).
final class KeybagCache: Sendable {
    let location: DomainLocation
    let io: any FileIO
    private struct Stamp: Equatable { var ino: UInt64; var size: Int64; var mtime: Int; var mtimeNS: Int; var ctimeNS: Int }
    private struct State: @unchecked Sendable { var stamp: Stamp?; var bag: Keybag; var none: [UInt32: ClassKey] }
    private let state: Locked<State>

    init(_ location: DomainLocation, io: any FileIO, bag: Keybag) {
        self.location = location
        self.io = io
        self.state = Locked(State(stamp: Self.stamp(location.keybagPath), bag: bag, none: [:]))
    }

    /// The current keybag, re-read first if the file changed since.
    func bag() throws(ProtectionError) -> Keybag {
        let now = Self.stamp(location.keybagPath)
        if let cached = state.withLock({ $0.stamp == now && now != nil ? $0.bag : nil }) { return cached }
        let bag = try Keybag.load(location, io: io) { (id) throws(ProtectionError) in try DeviceSecret.load(for: id, at: location, io: io) }
        state.withLock { $0 = State(stamp: now, bag: bag, none: [:]) }
        return bag
    }

    /// Replaces the cached keybag after this process wrote it.
    func update(_ bag: Keybag) {
        state.withLock { $0 = State(stamp: Self.stamp(location.keybagPath), bag: bag, none: [:]) }
    }

    /// Generation `g` of class `none`, unwrapped with the device secret once and kept (it is never locked).
    func noneKey(_ g: UInt32) throws(ProtectionError) -> ClassKey? {
        let bag = try bag()
        if let k = state.withLock({ $0.none[g] }) { return k }
        let device = try DeviceSecret.load(for: bag.domainID, at: location, io: io)
        guard let k = try bag.unwrapNone(g, device) else { return nil }
        state.withLock { $0.none[g] = k }
        return k
    }

    private static func stamp(_ path: String) -> Stamp? {
        var st = stat()
        guard fstatat(AT_FDCWD, path, &st, 0) == 0 else { return nil }
        return Stamp(ino: UInt64(st.st_ino), size: Int64(st.st_size), mtime: st.st_mtim.tv_sec, mtimeNS: st.st_mtim.tv_nsec, ctimeNS: st.st_ctim.tv_nsec)
    }
}

/// The `ClassKeyProvider` of a protection domain: public parts from the keybag, secret halves from the key store.
///
/// Classes A and C wrap and unwrap with the secret from the store (the kernel
/// keyring, read on every use); class B seals to the public key in the keybag,
/// so it can create while locked, and opens with the private key from the
/// store; class `none` uses the key the device secret unwraps.
final class DomainClassKeys: ClassKeyProvider {
    let cache: KeybagCache
    let store: any ClassKeyStore

    init(cache: KeybagCache, store: any ClassKeyStore) {
        self.cache = cache
        self.store = store
    }

    func currentGeneration(of c: ProtectionClass) throws(ProtectionError) -> UInt32 {
        guard let e = try cache.bag().contents.current(c) else { throw .locked(c) }
        return e.generation
    }

    func wrapFileKey(_ fileKey: borrowing SecretBytes, for c: ProtectionClass, generation g: UInt32, ad: UnsafeRawBufferPointer) throws(ProtectionError) -> [UInt8] {
        try key(c, g, needSecret: !c.usesPublicKeySealing).wrap(fileKey, ad: ad)
    }

    func unwrapFileKey(_ wrapped: UnsafeRawBufferPointer, for c: ProtectionClass, generation g: UInt32, ad: UnsafeRawBufferPointer) throws(ProtectionError) -> SecretBytes {
        try key(c, g, needSecret: true).unwrap(wrapped, ad: ad)
    }

    /// Generation `g` of `c`, with its secret half when `needSecret`.
    /// - Throws: `.locked` when the secret is not in the store; `unknownGeneration` when the keybag never had it.
    func key(_ c: ProtectionClass, _ g: UInt32, needSecret: Bool) throws(ProtectionError) -> ClassKey {
        if c == .none {
            guard let k = try cache.noneKey(g) else { throw .unknownGeneration(c, g) }
            return k
        }
        guard let entry = try cache.bag().contents.entry(c, g) else {
            // Unlocked but without this generation: the header names a key this domain never had.
            throw .unknownGeneration(c, g)
        }
        let pk = try entry.publicKey.map { (b) throws(ProtectionError) in try crypto { () throws(CryptoError) in try X25519PublicKey(bytes: b) } }
        guard needSecret else { return ClassKey(c, generation: g, secret: nil, publicKey: pk) }
        guard let s = try store.secret(c, g) else { throw .locked(c) }
        return ClassKey(c, generation: g, secret: SharedSecret(s), publicKey: pk)
    }
}
