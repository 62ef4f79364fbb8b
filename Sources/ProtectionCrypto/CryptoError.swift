/// The error every ProtectionCrypto operation throws.
///
/// `code` is what a program switches on; `message` explains, without ever
/// including key bytes.
public struct CryptoError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// A tag did not verify: the ciphertext, nonce, associated data or key is wrong.
        case authenticationFailed
        /// A buffer or input had the wrong length.
        case invalidLength
        /// A public key was rejected (low-order point: the shared secret would be all zeros).
        case invalidPublicKey
        /// The cipher is not supported on this CPU (AES-256-GCM without AES-NI/PCLMUL).
        case unsupportedCipher
        /// Locked memory could not be allocated (`sodium_malloc` returned NULL).
        case outOfMemory
        /// libsodium could not initialise, or an operation it should not fail did fail.
        case libraryUnavailable
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
