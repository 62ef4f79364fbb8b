internal import CShims

#if canImport(Glibc)
import Glibc
#endif

/// Buffer handling for the `*xattr` calls, whichever form (path, link, descriptor) they take.
package enum ExtendedAttributes {
    /// Copies the `user.*` attributes of the open file `src` to the open file `dst` (nothing where unsupported).
    package static func copyUserAttributes(from src: Int32, to dst: Int32) throws(SystemError) {
        let names: [String]
        do throws(SystemError) { names = try ExtendedAttributes.names { flistxattr(src, $0, $1) } } catch where error.errno == ENOTSUP {
            return
        }
        for name in names where name.hasPrefix("user.") {
            guard let value = try ExtendedAttributes.value({ fgetxattr(src, name, $0, $1) }) else { continue }
            let rc = value.withUnsafeBytes { fsetxattr(dst, name, $0.baseAddress, $0.count, 0) }
            guard rc == 0 else { throw SystemError(errno) }
        }
    }

    /// The value of attribute `name` of `path` (not following a final link); nil when absent.
    package static func value(of name: String, at path: String) throws(SystemError) -> [UInt8]? {
        try value { lgetxattr(path, name, $0, $1) }
    }

    /// The value of attribute `name` of the open file `fd`; nil when absent.
    package static func value(of name: String, in fd: Int32) throws(SystemError) -> [UInt8]? {
        try value { fgetxattr(fd, name, $0, $1) }
    }

    /// Sets attribute `name` of the open file `fd` to `value` (`fsetxattr`, created or replaced).
    package static func set(_ name: String, to value: [UInt8], in fd: Int32) throws(SystemError) {
        let rc = value.withUnsafeBytes { fsetxattr(fd, name, $0.baseAddress, $0.count, 0) }
        guard rc == 0 else { throw SystemError(errno) }
    }

    /// Removes attribute `name` of the open file `fd` (`fremovexattr`); an absent attribute is not an error.
    package static func remove(_ name: String, in fd: Int32) throws(SystemError) {
        guard fremovexattr(fd, name) == 0 || errno == ENODATA else { throw SystemError(errno) }
    }

    /// The attribute names a `listxattr`-style call returns (`call(buffer, size)`).
    package static func names(_ call: (UnsafeMutablePointer<CChar>?, Int) -> Int) throws(SystemError) -> [String] {
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
    package static func value(_ call: (UnsafeMutableRawPointer?, Int) -> Int) throws(SystemError) -> [UInt8]? {
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

/// Reads that leave a file's access time alone.
package enum AccessTime {
    /// Stops reads through the open file description `fd` from updating the file's access time (`O_NOATIME`); false
    /// where the kernel refuses it (the caller does not own the file), which leaves reads as they were.
    ///
    /// For files read and written in turns, such as a database's: under `relatime` (Linux's default) the first read
    /// after each write updates the access time, which dirties the inode and starts a transaction of the file system's
    /// journal (`touch_atime`: 2.7 % of a protected WAL database's CPU time in the mixed benchmark).
    @discardableResult
    package static func skipUpdates(_ fd: Int32) -> Bool { system_set_noatime(fd) == 0 }
}
