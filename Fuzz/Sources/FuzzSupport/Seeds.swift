// Writing seed files for a corpus (the targets' --write-seeds).
#if canImport(Glibc)
import Glibc
#endif

/// Writes `bytes` to `path`, replacing it.
public func writeSeed(_ bytes: [UInt8], to path: String) {
    let f = fopen(path, "wb")
    _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, f) }
    fclose(f)
}
