// dp-sqlbench-cipher: the SQLite workload (Workload.swift, the same source as dp-sqlbench's) on SQLCipher.
//
// Usage: dp-sqlbench-cipher sqlcipher --dir DIR [--mode wal|delete] [--rows N] ... (as dp-sqlbench)
// SQLCipher with its own defaults (3.4: PBKDF2-HMAC-SHA1, 64,000 iterations; AES-256-CBC with an HMAC-SHA1 per page)
// except the page size, 4 KiB as for the other contenders (`cipher_page_size`). The key is set once per connection
// (`PRAGMA key`), so its derivation is in `open-ms`, outside the timed loops; `--info` prints what SQLCipher reports.
import BaselineSQLCipher
import Foundation

let args = Array(CommandLine.arguments.dropFirst())
guard args.first == "sqlcipher", let dirIndex = args.firstIndex(of: "--dir"), dirIndex + 1 < args.count else {
    FileHandle.standardError.write(Data("usage: dp-sqlbench-cipher sqlcipher --dir DIR [--mode wal|delete] [--rows N] ...\n".utf8))
    exit(64)
}
let dir = args[dirIndex + 1]
let size = WorkloadSize(args)
let opener = Opener(
    filename: { $0 }, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, vfs: nil,
    first: ["PRAGMA key = 'dp-sqlbench passphrase'", "PRAGMA cipher_page_size = 4096"])
do {
    let path = "\(dir)/sqlcipher-\(size.mode).db"
    for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) }
    if args.contains("--info") {
        let c = try Connection(path, opener)
        _ = try c.text("SELECT count(*) FROM sqlite_master")
        print("sqlcipher info: cipher_version \(try c.text("PRAGMA cipher_version")), sqlite \(String(cString: sqlite3_libversion())), kdf_iter \(try c.text("PRAGMA kdf_iter")), cipher \(try c.text("PRAGMA cipher")), cipher_use_hmac \(try c.text("PRAGMA cipher_use_hmac")), cipher_page_size \(try c.text("PRAGMA cipher_page_size")), provider \(try c.text("PRAGMA cipher_provider")) \(try c.text("PRAGMA cipher_provider_version"))")
    } else {
        try runWorkload(contender: "sqlcipher", path: path, opener: opener, size: size)
    }
    for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) }
} catch {
    FileHandle.standardError.write(Data("dp-sqlbench-cipher: error: \(error)\n".utf8))
    exit(1)
}
