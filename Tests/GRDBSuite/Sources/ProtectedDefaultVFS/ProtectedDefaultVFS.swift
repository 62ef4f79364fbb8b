// The protected VFS as the default VFS of the GRDB suite's test process (and of that process only).
import DataProtection
import DataProtectionSQLite
import Foundation
import KernelKeyring
import ProtectionCrypto
import SuiteSQLite

/// Creates a throwaway domain whose class keys live in a private session keyring of this process, unlocks it,
/// registers its VFS and makes that VFS SQLite's default, so every database GRDB's tests open by path is protected.
///
/// Every main database, journal and WAL then becomes a protected file of the class the VFS gives a filename without
/// a `protection` URI parameter: completeUntilFirstUserAuthentication (C), unlocked here for the whole run. A failure
/// stops the process: a suite run against the default VFS by accident would report a pass count that means nothing.
@_cdecl("grdb_suite_install_protected_vfs")
public func installProtectedVFS() {
    do {
        try Keyring().joinNewSessionKeyring()
        let home = NSTemporaryDirectory() + "grdb-suite-domain-\(getpid())"
        // A directory of this pid is an earlier process's that had the same pid (the pid is this process's now, and
        // scripts/grdb-suite removes them after a run; a crashed class leaves its own).
        try? FileManager.default.removeItem(atPath: home)
        let passphrase = try SecretBytes(utf8: "grdb suite")
        let domain = try ProtectionDomain.create(
            at: DomainLocation(home: home + "/home", deviceDirectory: home + "/devices"), passphrase: passphrase, kdf: .minimumForTests,
            keyStore: .kernel(.session)) { _ in }
        try domain.unlock(passphrase: passphrase)
        let vfs = try ProtectedVFS.of(domain.files)
        guard let p = sqlite3_vfs_find(vfs.name), sqlite3_vfs_register(p, 1) == SQLITE_OK,
            let d = sqlite3_vfs_find(nil), String(cString: d.pointee.zName) == vfs.name
        else { fatalError("grdb-suite: could not make '\(vfs.name)' the default VFS") }
        keep = domain
        FileHandle.standardError.write(Data("grdb-suite: default VFS is '\(vfs.name)' (domain \(home), session keyring of pid \(getpid()))\n".utf8))
    } catch {
        fatalError("grdb-suite: could not install the protected VFS: \(error)")
    }
}

/// The domain, alive for the life of the process.
nonisolated(unsafe) private var keep: ProtectionDomain?
