internal import CSodium

/// Zeroes `bytes` with `sodium_memzero`, which the compiler cannot drop as a dead store before a `deallocate`.
///
/// For buffers that held plaintext or key material outside `SecretBytes` (a file handle's staging, a stream's
/// batches), wiped before they are freed or handed back.
package func wipeMemory(_ bytes: UnsafeMutableRawBufferPointer) {
    if let p = bytes.baseAddress, bytes.count > 0 { sodium_memzero(p, bytes.count) }
}
