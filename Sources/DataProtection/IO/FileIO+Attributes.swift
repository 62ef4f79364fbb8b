internal import CShims

#if canImport(Glibc)
import Glibc
#endif

extension FileIO {
    /// Copies the `user.*` extended attributes of `source` to `destination` by path, without following symbolic links.
    ///
    /// A missing `source` (a new file) or a filesystem without extended
    /// attributes copies nothing; any other failure throws, so an atomic
    /// replace never silently drops a flag such as exclude-from-backup.
    public func copyUserAttributes(from source: String, to destination: String) throws(SystemError) {
        let names: [String]
        do throws(SystemError) {
            names = try ExtendedAttributes.names { llistxattr(source, $0, $1) }
        } catch where error.errno == ENOENT || error.errno == ENOTSUP {
            return
        }
        for name in names where name.hasPrefix("user.") {
            guard let value = try ExtendedAttributes.value({ lgetxattr(source, name, $0, $1) }) else { continue }
            let rc = value.withUnsafeBytes { lsetxattr(destination, name, $0.baseAddress, $0.count, 0) }
            guard rc == 0 else { throw SystemError(errno) }
        }
    }
}

/// Buffer handling for the `*xattr` calls, whichever form (path, link, descriptor) they take.
enum ExtendedAttributes {
    /// The value of attribute `name` of `path` (not following a final link); nil when absent.
    static func value(of name: String, at path: String) throws(SystemError) -> [UInt8]? {
        try value { lgetxattr(path, name, $0, $1) }
    }

    /// The attribute names a `listxattr`-style call returns (`call(buffer, size)`).
    static func names(_ call: (UnsafeMutablePointer<CChar>?, Int) -> Int) throws(SystemError) -> [String] {
        while true {
            let size = call(nil, 0)
            guard size >= 0 else { throw SystemError(errno) }
            if size == 0 { return [] }
            var buffer = [CChar](repeating: 0, count: size)
            let got = buffer.withUnsafeMutableBufferPointer { call($0.baseAddress, size) }
            if got < 0 && errno == ERANGE { continue }  // grew in between
            guard got >= 0 else { throw SystemError(errno) }
            return buffer[..<got].split(separator: 0).map { String(decoding: $0.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        }
    }

    /// The value a `getxattr`-style call returns, or nil when the attribute is absent (ENODATA).
    static func value(_ call: (UnsafeMutableRawPointer?, Int) -> Int) throws(SystemError) -> [UInt8]? {
        while true {
            let size = call(nil, 0)
            if size < 0 && errno == ENODATA { return nil }
            guard size >= 0 else { throw SystemError(errno) }
            var buffer = [UInt8](repeating: 0, count: size)
            let got = buffer.withUnsafeMutableBytes { call($0.baseAddress, size) }
            if got < 0 && errno == ERANGE { continue }
            if got < 0 && errno == ENODATA { return nil }
            guard got >= 0 else { throw SystemError(errno) }
            return Array(buffer[..<got])
        }
    }
}
