internal import CSQLite
import DataProtection

#if canImport(Glibc)
import Glibc
#endif

/// Why a database call failed: SQLite's result code and message, and the protection error behind it, if any.
///
/// A protected file's failure reaches SQLite as a result code a raw SQLite caller can switch on: `SQLITE_AUTH`
/// ("authorization denied") for a locked class, `DatabaseError.tampered` (17419: `SQLITE_CORRUPT` with an extended code of
/// the VFS's own, 0x44) for a page of the database, its journal or its WAL that failed authentication,
/// `SQLITE_CANTOPEN`/`SQLITE_NOTADB` at open. A `ProtectedDatabase` caller gets the `ProtectionError` itself, whose
/// message names the file and the fix ("class complete is locked; run `dpctl unlock`").
public struct DatabaseError: Error, Sendable, CustomStringConvertible {
    /// SQLite's extended result code (`SQLITE_AUTH` is 23).
    public let resultCode: Int32
    /// What failed, and how to fix it.
    public let message: String
    /// The protected file's error that made SQLite fail, if that is what happened.
    public let protection: ProtectionError?

    /// The extended result code (17419) a raw SQLite caller gets when a page of the database, its rollback journal or
    /// its WAL failed authentication (flipped, truncated or spliced bytes): `SQLITE_CORRUPT` (11) in its low byte, so
    /// code that checks the primary code sees corruption, and 0x44 above it, which SQLite's own corruption codes
    /// (`SQLITE_CORRUPT_VTAB`, `_SEQUENCE`, `_INDEX`: 1–3) never use, so it tells tampering from a SQLite finding.
    public static let tampered: Int32 = DP_CORRUPT_TAMPERED

    /// Whether a page of the database, its journal or its WAL failed authentication: it was tampered with (or damaged),
    /// and no byte of it was returned; restore the database from a backup.
    public var isTampered: Bool { resultCode == Self.tampered || protection.map { [.authenticationFailed, .corruptHeader].contains($0.code) } == true }

    /// Whether the database's class is locked: the statement failed because `lock` withdrew its key.
    public var isLocked: Bool { protection?.code == .locked }

    public var description: String { message }

    init(_ resultCode: Int32, _ message: String, protection: ProtectionError? = nil) {
        self.resultCode = resultCode
        self.message = message
        self.protection = protection
    }

    /// The failure of a call on `db` that returned `code`, with the protection error a VFS call recorded meanwhile.
    static func from(_ code: Int32, _ db: OpaquePointer?, _ action: String, _ path: String) -> DatabaseError {
        let recorded = VFSFailure.take()
        if let recorded {
            return DatabaseError(code, "unable to \(action) '\(path)': \(recorded.message)", protection: recorded)
        }
        let text = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(code))
        return DatabaseError(code, "unable to \(action) '\(path)': \(text) (SQLite \(code & 0xff))")
    }
}

/// The SQLite result code a VFS call returns for a protection error (`ioCode` for an I/O failure).
func sqliteCode(for e: ProtectionError, io ioCode: Int32) -> Int32 {
    switch e.code {
    case .locked: SQLITE_AUTH
    case .authenticationFailed, .corruptHeader: DP_CORRUPT_TAMPERED
    case .notProtected, .unsupportedVersion: SQLITE_NOTADB
    case .notFound: SQLITE_CANTOPEN
    case .readOnly: SQLITE_READONLY
    case .fileTooLarge, .io(ENOSPC): SQLITE_FULL
    default: ioCode
    }
}

/// The last protection error a VFS call met on this thread: SQLite calls the VFS on the thread that runs the
/// statement, so the connection that gets the result code takes the error that explains it.
package enum VFSFailure {
    private final class Box { var error: ProtectionError? }

    private static let key: pthread_key_t = {
        var k = pthread_key_t()
        pthread_key_create(&k) { p in if let p { Unmanaged<AnyObject>.fromOpaque(p).release() } }
        return k
    }()

    private static var box: Box {
        if let p = pthread_getspecific(key) { return Unmanaged<Box>.fromOpaque(p).takeUnretainedValue() }
        let b = Box()
        pthread_setspecific(key, Unmanaged.passRetained(b).toOpaque())
        return b
    }

    /// Records `e` and returns SQLite's code for it.
    static func record(_ e: ProtectionError, io ioCode: Int32) -> Int32 {
        box.error = e
        return sqliteCode(for: e, io: ioCode)
    }

    /// The recorded error, forgotten.
    package static func take() -> ProtectionError? {
        let b = box
        defer { b.error = nil }
        return b.error
    }
}
