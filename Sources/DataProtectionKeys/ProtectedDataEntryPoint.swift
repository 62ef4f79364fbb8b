import Synchronization

/// Every public way to open, create, read or write protected data: the one list the API and the guarantee matrix share.
///
/// Each entry point names itself when it asks for keys (`ClassKeys.admit`), so
/// every one of them goes through the same lock check and revocation. The
/// guarantee matrix test (`GuaranteeMatrixTests`) drives every case × every
/// class × {unlocked, locked before open, locked while open}, in this process
/// and in another one, with an exhaustive `switch`: a case added here fails to
/// compile there until it is covered, and the test checks that each driver
/// really reached its entry point (`observed`).
public enum ProtectedDataEntryPoint: Int, CaseIterable, Sendable, CustomStringConvertible {
    /// `ProtectedFiles.write(_:to:protection:)`: a whole file from memory.
    case filesWrite
    /// `ProtectedFiles.write(contentsOf:to:protection:)`: a whole file from a descriptor (`dpctl put`).
    case filesWriteStream
    /// `ProtectedFiles.read(_:)`: a whole file into memory.
    case filesRead
    /// `ProtectedFiles.read(_:into:)`: a whole file to a descriptor (`dpctl cat`).
    case filesReadStream
    /// `ProtectedFiles.create(_:protection:)`: a new file, open for writing.
    case filesCreate
    /// `ProtectedFiles.open(_:)`: a handle for reading.
    case filesOpen
    /// `ProtectedFiles.open(_:forWriting: true)`: a handle for reading and writing.
    case filesOpenForWriting
    /// `ProtectedFiles.rewrap(_:to:)` and `ProtectionDomain.setClass`: the per-file key moved to another class
    /// (`Container.setProtection`, and DataProtectionFoundation's `setAttributes` and `URL.setResourceValues`, forward to them).
    case filesRewrap
    /// `ProtectedFiles.protectInPlace(_:as:)`: a plain file turned into a protected one.
    case filesProtect
    /// `ProtectedFiles.unprotectInPlace(_:)`: a protected file turned back into a plain one.
    case filesUnprotect
    /// `Container.write(_:to:protection:)` and its `Data`/`URL` forms; DataProtectionFoundation's `data.write(to:)`,
    /// `write(protectedTo:options:)` and `ProtectedFileManager.createFile` are thin forwards to it.
    case containerWrite
    /// `Container.read(_:)` and `contents(of:)`; DataProtectionFoundation's `Data(contentsOf:)` and
    /// `ProtectedFileManager.contents(atPath:)` are thin forwards to it.
    case containerRead
    /// `Container.create(_:protection:)`; DataProtectionFoundation's `write(protectedTo:options: .withoutOverwriting)`
    /// forwards to it.
    case containerCreate
    /// `Container.open(_:forWriting:)`; DataProtectionFoundation's `ProtectedFileCursor` forwards to it.
    case containerOpen
    /// `Preferences` reads (`value(forKey:)`, `dictionaryRepresentation()`, the typed getters); their async forms
    /// (`Preferences.nonblocking`) and DataProtectionFoundation's `ProtectedUserDefaults` getters (and theirs) forward to them.
    case preferencesRead
    /// `Preferences` writes (`set`, `update`, `removeValue`); `Preferences.nonblocking` and `ProtectedUserDefaults`'
    /// writes (and their async forms) forward to them.
    case preferencesWrite
    /// `ProtectedDatabase.open(path:protection:files:)` and a URI open through the `dataprotection` VFS: a read-write
    /// database connection (DataProtectionSQLite), whose main file, journal and WAL are protected files. GRDB's
    /// `DatabaseQueue(protectedPath:…)` and `DatabasePool(protectedPath:…)` (DataProtectionGRDB) are this entry point,
    /// not one of their own: their connections are URI opens through the same VFS (`databaseOpenReadOnly` for a
    /// read-only configuration and a pool's readers).
    case databaseOpen
    /// `ProtectedDatabase.open(path:protection:files:readOnly: true)` (or `mode=ro`): a read-only database connection.
    case databaseOpenReadOnly

    /// The API it stands for, as the matrix prints it.
    public var description: String {
        switch self {
        case .filesWrite: "files.write"
        case .filesWriteStream: "files.write(contentsOf:)"
        case .filesRead: "files.read"
        case .filesReadStream: "files.read(into:)"
        case .filesCreate: "files.create"
        case .filesOpen: "files.open"
        case .filesOpenForWriting: "files.open(forWriting:)"
        case .filesRewrap: "files.rewrap"
        case .filesProtect: "files.protectInPlace"
        case .filesUnprotect: "files.unprotectInPlace"
        case .containerWrite: "container.write"
        case .containerRead: "container.read"
        case .containerCreate: "container.create"
        case .containerOpen: "container.open"
        case .preferencesRead: "preferences.read"
        case .preferencesWrite: "preferences.write"
        case .databaseOpen: "database.open"
        case .databaseOpenReadOnly: "database.open(readOnly:)"
        }
    }

    @usableFromInline var bit: UInt64 { 1 << UInt64(rawValue) }

    /// Notes that this entry point asked for keys (one relaxed load when already noted).
    ///
    /// Inlinable, as `ClassKeys.admit` is: every open in DataProtectionFiles runs it.
    @inlinable func record() {
        let b = bit
        if Self.seen.load(ordering: .relaxed) & b == 0 { Self.seen.bitwiseOr(b, ordering: .relaxed) }
    }

    @usableFromInline static let seen = Atomic<UInt64>(0)

    /// Test hook: the entry points that asked for keys in this process since the last `resetObserved()` (the guarantee
    /// matrix checks that each driver reached its own entry point).
    @_spi(Testing) public static var observed: Set<ProtectedDataEntryPoint> {
        let s = seen.load(ordering: .relaxed)
        return Set(allCases.filter { s & $0.bit != 0 })
    }

    /// Test hook: forgets what `observed` reports (the matrix test calls it before each driver).
    @_spi(Testing) public static func resetObserved() { seen.store(0, ordering: .relaxed) }
}
