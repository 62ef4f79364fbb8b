/// A reference to one `SecretBytes`, for places that need a copyable handle
/// (dictionaries, class properties shared between threads).
///
/// Copies of the reference share the one locked buffer; it is zeroed and
/// freed when the last reference goes.
public final class SharedSecret: Sendable {
    public let secret: SecretBytes

    public init(_ secret: consuming SecretBytes) { self.secret = secret }
}
