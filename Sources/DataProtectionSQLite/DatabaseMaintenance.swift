import DataProtection
import DataProtectionKeys
import ProtectionCrypto
import SystemLayer

// `rotate` and `repair` of databases as units: rotation rewraps a database's main file, journal and WAL while holding
// its exclusive lock (the one `withExclusiveAccess` takes for `set-class`), and repair lets SQLite finish what a crash
// left in the unit after the file layer has finished its own chunk journals.
extension DatabaseUnit {
    /// The protected databases of class `c` (every class when nil) among `paths` and the directories below them.
    ///
    /// - Throws: `.notFound`, `.io` when a path cannot be walked.
    public static func databases(under paths: [String], of c: ProtectionClass? = nil, files: ProtectedFiles) throws(ProtectionError) -> [String] {
        var out: [String] = []
        for p in paths {
            try FileTree.walk(p) { (f) throws(ProtectionError) in
                guard mainFile(ofCompanion: f, files: files) == nil, isDatabase(f, files: files),
                      let info = try? files.info(f), c == nil || info.protectionClass == c else { return }
                out.append(f)
            }
        }
        return out
    }

    /// `ProtectionDomain.rotate`, holding the exclusive lock of every database of the class under `paths` for the whole
    /// rotation, so that each database's main file, journal and WAL are rewrapped together while no connection has them.
    ///
    /// A database in use is refused before anything changes (no new generation, no journal). A crash part way leaves
    /// the rotation journal, which the next `rotate` resumes; every file reads with the old generation or the new one
    /// meanwhile (the old one leaves the keybag only when every listed file is done).
    /// - Parameters: as `ProtectionDomain.rotate` (a resumed rotation ignores `paths`; the databases locked are those
    ///   under `paths`).
    /// - Throws: `.coordinationFailed` naming the database in use and the fix; what `ProtectionDomain.rotate` throws.
    public static func rotate(
        _ c: ProtectionClass, paths: [String], domain: ProtectionDomain, passphrase: borrowing SecretBytes,
        progress: (RotationProgress) -> Bool = { _ in true }
    ) throws(ProtectionError) -> RotationReport {
        let held = try databases(under: paths, of: c, files: domain.files)
        return try withExclusiveAccess(to: held[...], files: domain.files, action: "rotate the class key of") { () throws(ProtectionError) in
            try domain.rotate(c, paths: paths, passphrase: passphrase, progress: progress)
        }
    }

    /// Runs `body` holding the exclusive lock of every database in `paths` (taken in order; none changes if one is in use).
    static func withExclusiveAccess<T>(
        to paths: ArraySlice<String>, files: ProtectedFiles, action: String, _ body: () throws(ProtectionError) -> T
    ) throws(ProtectionError) -> T {
        guard let first = paths.first else { return try body() }
        return try withExclusiveAccess(first, files: files, action: action) { () throws(ProtectionError) in
            try withExclusiveAccess(to: paths.dropFirst(), files: files, action: action, body)
        }
    }

    /// What `repair` did to one database.
    public struct Repair: Sendable, Equatable {
        /// The database's main file.
        public var path: String
        /// SQLite rolled back a transaction its rollback journal held (a writer died in it): its changes are undone.
        public var journalRolledBack: Bool
        /// WAL frames (committed transactions) SQLite copied into the main file.
        public var framesCheckpointed: Int
        /// `PRAGMA integrity_check` after the repair: "ok", or what SQLite found.
        public var integrity: String
    }

    /// Lets SQLite finish what a crash left in the protected database `path`: a hot rollback journal is rolled back and
    /// the WAL checkpointed into the main file, then `PRAGMA integrity_check` runs; while no other connection holds it.
    ///
    /// The file layer's own chunk journals come first (`ProtectedFiles.recoverTree`, keyless); this step needs the
    /// class key, as any connection does. A page that fails authentication stops it with `.authenticationFailed`.
    /// - Throws: `.coordinationFailed` when the database is in use; `.locked`; `.authenticationFailed`; `.io`.
    public static func repair(_ path: String, files: ProtectedFiles) throws(ProtectionError) -> Repair {
        try withExclusiveAccess(path, files: files, action: "repair") { () throws(ProtectionError) in }
        let settled = try settleProtected(path, files: files, action: "repair")
        let check: [[DatabaseValue]]
        do throws(DatabaseError) {
            let db = try ProtectedDatabase.open(path: path, protection: .none, files: files, busyTimeout: .zero)
            defer { db.close() }
            check = try db.rows("PRAGMA integrity_check")
        } catch { throw error.protectionError("repair", path) }
        let integrity = check.map { row in if case .text(let t)? = row.first { t } else { "?" } }.joined(separator: "; ")
        return Repair(path: path, journalRolledBack: settled.journalRolledBack, framesCheckpointed: settled.framesCheckpointed, integrity: integrity)
    }
}
