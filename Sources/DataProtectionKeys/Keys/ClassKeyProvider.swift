import ProtectionCrypto

/// The narrow interface through which class keys reach the file layer.
///
/// The keybag implements it with keys held in the kernel keyring;
/// `InMemoryClassKeys` implements it for single-process embedding and tests.
/// A provider never hands out a class key itself: it wraps and unwraps
/// per-file keys, so a class key never leaves its holder.
@usableFromInline package protocol ClassKeyProvider: Sendable {
    /// The class-key generation new files of `protectionClass` are wrapped with.
    /// - Throws: `.locked` when no key of that class can wrap right now.
    func currentGeneration(of protectionClass: ProtectionClass) throws(ProtectionError) -> UInt32

    /// Wraps `fileKey` for `protectionClass` under class-key `generation`, binding `ad`.
    ///
    /// Class `completeUnlessOpen` seals to the class public key, so it works while locked.
    /// - Returns: `KeyWrap` output (classes A, C, D) or `KeySealing` output (class B).
    /// - Throws: `.locked` when the class key is unavailable.
    func wrapFileKey(
        _ fileKey: borrowing SecretBytes, for protectionClass: ProtectionClass, generation: UInt32, ad: UnsafeRawBufferPointer
    ) throws(ProtectionError) -> [UInt8]

    /// Unwraps a per-file key wrapped by `wrapFileKey`.
    /// - Throws: `.locked` when the class key is unavailable; `.authenticationFailed`
    ///   when the wrapped bytes or `ad` were altered.
    func unwrapFileKey(
        _ wrapped: UnsafeRawBufferPointer, for protectionClass: ProtectionClass, generation: UInt32, ad: UnsafeRawBufferPointer
    ) throws(ProtectionError) -> SecretBytes
}

extension ProtectionError {
    /// The error every provider throws for a class whose key is not available.
    public static func locked(_ c: ProtectionClass) -> ProtectionError {
        ProtectionError(.locked, "class \(c) is locked; run `dpctl unlock`")
    }

    /// The error every admission throws once the keys were retired (`DataProtectionService` shut down in this process).
    public static var retired: ProtectionError {
        ProtectionError(.shuttingDown, "the service is shutting down and no longer opens protected data; retry against the restarted service")
    }

    /// The error for a header naming a class-key generation the domain does not hold.
    public static func unknownGeneration(_ c: ProtectionClass, _ g: UInt32) -> ProtectionError {
        ProtectionError(.authenticationFailed, "the file needs generation \(g) of class \(c), which this domain does not have: it belongs to another domain, or its header was altered")
    }
}
