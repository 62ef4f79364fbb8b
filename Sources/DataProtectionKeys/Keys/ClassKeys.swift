import DataProtectionTelemetry
import ProtectionCrypto

/// A domain's class keys together with the lock that revokes them: the one source protected files get keys from.
///
/// Every protected file, container, preferences store and CLI command reaches
/// class keys through one of these, and every per-file key it derives is held
/// by an object registered with the same `Revocation`, so a lock reaches it
/// whatever path opened it. There are two kinds, and no public way to make a
/// third:
/// - `ProtectionDomain.keys`: the keybag's keys in the kernel keyring (or the
///   domain's explicit in-process store), revoked by the domain's `LiveLock` in
///   every process.
/// - `InMemoryClassKeys`: the explicit in-process key store, revoked by its own
///   `lock(_:)`.
///
/// The class is public so it can be passed around, but not `open`, and its
/// initialiser is `package` (ProtectionDomain, in the umbrella module, makes
/// the domain's): nothing outside this package can pair keys with a lock that
/// does not revoke them.
public class ClassKeys: @unchecked Sendable {  // @unchecked: immutable `let`s of Sendable types; non-final for InMemoryClassKeys
    /// Wraps and unwraps per-file keys; reached only through `admit`.
    @usableFromInline let provider: any ClassKeyProvider
    /// The lock state these keys follow, and the registry of everything holding keys derived from them.
    @usableFromInline package let revocation: Revocation

    package init(provider: any ClassKeyProvider, revocation: Revocation) {
        self.provider = provider
        self.revocation = revocation
    }

    /// The class-key generation new files of `c` are wrapped with.
    /// - Throws: `.locked` when no key of that class can wrap right now.
    package func currentGeneration(of c: ProtectionClass) throws(ProtectionError) -> UInt32 {
        try provider.currentGeneration(of: c)
    }

    /// Runs `body` with the wrap and unwrap operations for class `c`, as one acquisition of key material.
    ///
    /// This is the only way to wrap or unwrap a per-file key. `body` must hand
    /// whatever key material it keeps to an object it registers with
    /// `revocation` before it returns (a handle), or wipe it. The acquisition
    /// holds the revocation's gate shared, and a lock's revocation takes the
    /// gate exclusively before it lists what to revoke, so either the lock state
    /// already says "locked" here (and `.locked` is thrown before any key is
    /// touched), or the lock waits for this acquisition and then revokes what it
    /// registered. There is no moment at which a lock has returned and a key
    /// obtained through this call is still held by an unregistered object.
    ///
    /// - Parameters:
    ///   - c: the class whose key is needed.
    ///   - via: the public entry point asking (the guarantee matrix checks every one of them).
    ///   - body: receives the access and the lock epoch the keys are obtained under.
    /// - Throws: `.locked` when `c` is locked; what `body` throws.
    ///   - also: a second class the body needs (a rewrap's new class). Admissions do not nest: ask for both at once.
    ///
    /// Inlinable (with `Revocation.admit`): every open in DataProtectionFiles calls it, where it was specialised
    /// and inlined before the modules split.
    @inlinable package func admit<R: ~Copyable>(
        _ c: ProtectionClass, also other: ProtectionClass? = nil, via: ProtectedDataEntryPoint, _ body: (borrowing KeyAccess, UInt64) throws(ProtectionError) -> R
    ) throws(ProtectionError) -> R {
        try revocation.admit(c, also: other, via: via) { (epoch) throws(ProtectionError) -> R in
            // A key the store no longer has (a class locked by another process, B's private key) is a refusal too.
            do throws(ProtectionError) { return try body(KeyAccess(provider: provider, metrics: revocation.telemetry.metrics), epoch) } catch {
                if error.code == .locked { revocation.countRefusal(c, via) }
                throw error
            }
        }
    }
}

/// Wrap and unwrap of per-file keys, available only inside `ClassKeys.admit`.
@usableFromInline package struct KeyAccess: ~Copyable {
    @usableFromInline let provider: any ClassKeyProvider
    /// Where the key fetch is timed (`dataprotection_key_fetch_duration`): one clock pair per open, none per read.
    @usableFromInline let metrics: TelemetryMetrics

    @usableFromInline init(provider: any ClassKeyProvider, metrics: TelemetryMetrics) {
        self.provider = provider
        self.metrics = metrics
    }

    @inlinable package func wrapFileKey(
        _ fileKey: borrowing SecretBytes, for c: ProtectionClass, generation: UInt32, ad: UnsafeRawBufferPointer
    ) throws(ProtectionError) -> [UInt8] {
        let t0 = metrics.recording ? Telemetry.now() : 0
        defer { if t0 != 0 { metrics.keyFetched(c.rawValue, since: t0) } }
        return try provider.wrapFileKey(fileKey, for: c, generation: generation, ad: ad)
    }

    @inlinable package func unwrapFileKey(
        _ wrapped: UnsafeRawBufferPointer, for c: ProtectionClass, generation: UInt32, ad: UnsafeRawBufferPointer
    ) throws(ProtectionError) -> SecretBytes {
        let t0 = metrics.recording ? Telemetry.now() : 0
        defer { if t0 != 0 { metrics.keyFetched(c.rawValue, since: t0) } }
        return try provider.unwrapFileKey(wrapped, for: c, generation: generation, ad: ad)
    }
}
