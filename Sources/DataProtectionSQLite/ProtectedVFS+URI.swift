internal import CSQLite
import DataProtection

extension ProtectedVFS {
    /// The URI filename that opens `path` through this VFS: `file:<path>?vfs=<name>&protection=<class>`.
    ///
    /// Any SQLite open that accepts URI filenames reaches the protected database with it (SQLite built with
    /// `SQLITE_USE_URI`, as Debian's is, or `SQLITE_OPEN_URI`), GRDB's included; the VFS must be registered first
    /// (`ProtectedVFS.of(files)` or `register(files:name:)`), or SQLite fails the open with "no such vfs".
    /// - Parameters:
    ///   - path: the database file.
    ///   - protection: the class of a new database (an existing one keeps the class in its header).
    public func uri(_ path: String, protection: ProtectionClass) -> String {
        "file:" + Self.percentEncoded(path) + "?vfs=" + Self.percentEncoded(name) + "&protection=" + protection.name
    }

    /// Whether this SQLite reads a URI filename passed without `SQLITE_OPEN_URI` (built with `SQLITE_USE_URI`, as
    /// Debian's is): what an open that sets no such flag (GRDB's) needs, or SQLite would take the URI as a plain name.
    public static var readsURIFilenames: Bool { sqlite3_compileoption_used("USE_URI") != 0 }

    /// Whether the open connection `connection` (a `sqlite3 *`) goes through this VFS: the check that a URI open
    /// reached it, rather than the default VFS with its plain files.
    public func isVFS(of connection: OpaquePointer) -> Bool {
        var p: UnsafeMutablePointer<sqlite3_vfs>?
        guard sqlite3_file_control(connection, "main", SQLITE_FCNTL_VFS_POINTER, &p) == SQLITE_OK else { return false }
        return p == vfs
    }

    /// `text` with the characters a URI reserves escaped (SQLite decodes `%HH`).
    private static func percentEncoded(_ text: String) -> String {
        var out = ""
        for b in text.utf8 {
            switch b {
            case UInt8(ascii: "?"), UInt8(ascii: "#"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "="), 0..<0x20, 0x7f...:
                let hex = String(b, radix: 16, uppercase: true)
                out += hex.count < 2 ? "%0" + hex : "%" + hex
            default: out.unicodeScalars.append(Unicode.Scalar(b))
            }
        }
        return out
    }
}
