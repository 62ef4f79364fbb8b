import DataProtectionKeys
import DataProtectionFormat
import SystemLayer

// Where a protected file's rollback journal lives, and how its bytes are read (the layout is DataProtectionFormat's JournalFormat).

/// The path of the rollback journal of the protected file at `path`: `.<name>.dpjournal` in the same directory.
func journalPath(for path: String) -> String {
    let u = path.utf8
    guard let slash = u.lastIndex(of: UInt8(ascii: "/")) else { return ".\(path).dpjournal" }
    return "\(String(decoding: u[..<slash], as: UTF8.self))/.\(String(decoding: u[u.index(after: slash)...], as: UTF8.self)).dpjournal"
}

extension FileIO {
    /// Up to `count` bytes at `offset` (fewer only at end of file).
    func readBytes(_ fd: Int32, count: Int, at offset: Int64) throws(SystemError) -> [UInt8] {
        var failure: SystemError?
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { b, n in
            do throws(SystemError) { n = try readFully(fd, into: UnsafeMutableRawBufferPointer(b), at: offset) } catch {
                failure = error
                n = 0
            }
        }
        if let failure { throw failure }
        return bytes
    }
}
