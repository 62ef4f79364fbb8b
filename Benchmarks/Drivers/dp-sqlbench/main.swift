// dp-sqlbench: the SQLite workload (Workload.swift) on plain SQLite (the default VFS) or on the library's protected VFS.
//
// Usage: dp-sqlbench plain|protected --dir DIR [--mode wal|delete] [--rows N] [--batch N] [--points N] [--scans N]
//                    [--mixed-ops N] [--threads N]   (the mixed workload's threads, each its own connection: 4)
//                    [--pool-readers N] [--readers-on-copy] [--role-times]   (diagnostics of the mixed phases, Workload.swift)
// One contender, one journal mode per process (Benchmarks/compare-sqlite interleaves them with dp-sqlbench-cipher).
// Protected: a throwaway domain in DIR (minimum Argon2id, not timed: unlock is not what this measures), its class keys
// in a session keyring of this process, the database class complete through `ProtectedVFS` (4 KiB pages = chunks).
import BaselineSQLite
import DataProtection
import DataProtectionSQLite
import Foundation
import KernelKeyring
import ProtectionCrypto

let args = Array(CommandLine.arguments.dropFirst())
guard let contender = args.first, ["plain", "protected"].contains(contender),
    let dirIndex = args.firstIndex(of: "--dir"), dirIndex + 1 < args.count
else {
    FileHandle.standardError.write(Data("usage: dp-sqlbench plain|protected --dir DIR [--mode wal|delete] [--rows N] ...\n".utf8))
    exit(64)
}
let dir = args[dirIndex + 1]
let size = WorkloadSize(args)
let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
do {
    let path = "\(dir)/\(contender)-\(size.mode).db"
    for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) }
    if contender == "plain" {
        let opener = Opener(filename: { $0 }, flags: flags, vfs: nil, first: ["PRAGMA page_size = 4096"])
        try runWorkload(contender: contender, path: path, opener: opener, size: size)
    } else {
        try Keyring().joinNewSessionKeyring()
        let home = "\(dir)/domain-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: home) }
        let passphrase = try SecretBytes(utf8: "dp-sqlbench")
        let domain = try ProtectionDomain.create(
            at: DomainLocation(home: home + "/home", deviceDirectory: home + "/devices"), passphrase: passphrase, kdf: .minimumForTests,
            keyStore: .kernel(.session)) { _ in }
        try domain.unlock(passphrase: passphrase)
        let vfs = try ProtectedVFS.of(domain.files)
        let opener = Opener(
            filename: { vfs.uri($0, protection: .complete) }, flags: flags | SQLITE_OPEN_URI, vfs: vfs.name, first: ["PRAGMA page_size = 4096"])
        try runWorkload(contender: contender, path: path, opener: opener, size: size)
    }
    for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) }
} catch {
    FileHandle.standardError.write(Data("dp-sqlbench: error: \(error)\n".utf8))
    exit(1)
}
