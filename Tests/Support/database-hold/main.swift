// database-hold HOME DEVICES DIR [initialized-first]
// database-hold HOME DEVICES PATH idle
//
// Opens three protected databases of an unlocked domain in this process and stays: ARAW (class complete, through
// ProtectedDatabase, rollback journal), AGRDB (class complete, a GRDB DatabasePool in WAL mode) and BRAW (class
// completeUnlessOpen, ProtectedDatabase). Each gets `rows` rows whose text is `PAGEWIPE-<tag>-<5 digits>-…`, made inside
// SQLite (the SQL never spells a whole marker), and is read whole, so its pages sit in SQLite's page cache; no row
// value is copied into Swift memory. Prints `READY <sum of ARAW> <of AGRDB> <of BRAW>`, then answers one line per command on standard
// input: `check` (each connection's `sum(length(v))`, or `locked`), `reopen` (new connections: sum and integrity_check).
// KeyResidueTests scan its memory for the markers before and after `dpctl lock`. With `initialized-first` it initializes
// SQLite itself before any protected database (as a process that used SQLite first would), then prints what opening a
// complete and a completeUnlessOpen database does, and exits. With `idle` it opens the existing protected database PATH
// (one connection through the protected VFS), reads `count(*)` of its table `t` and prints `READY <count> <journal_mode>`,
// then holds the connection idle (no transaction, so in rollback-journal mode no SQLite lock) and answers `check` with the
// count again; at the end of its input it closes the connection and prints `CLOSED` (DatabaseConversionCommandTests).
import DataProtection
import DataProtectionGRDB
import DataProtectionSQLite
import Foundation
import GRDB

let args = CommandLine.arguments
guard args.count == 4 || args.count == 5 && ["initialized-first", "idle"].contains(args[4]) else {
    FileHandle.standardError.write(Data("usage: database-hold HOME DEVICES DIR [initialized-first] | HOME DEVICES PATH idle\n".utf8))
    exit(64)
}
let rows = 300
let sum = "SELECT sum(length(v)) FROM t"

/// The SQL that fills table `t` with the markers of `tag`.
func fill(_ tag: String) -> String {
    "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < \(rows)) "
        + "INSERT INTO t SELECT i, 'PAGE' || 'WIPE-\(tag)-' || printf('%05d', i) || '-' || hex(zeroblob(40)) FROM c"
}

/// One connection's answer: the sum, `locked`, or the error.
func answer(_ body: () throws -> Int64?) -> String {
    do { return "\(try body() ?? -1)" } catch let e as DataProtectionSQLite.DatabaseError where e.isLocked || e.resultCode & 0xff == 23 {
        return "locked"
    } catch let e as GRDB.DatabaseError where e.isProtectedDataLocked {
        return "locked"
    } catch {
        return "error(\(error))"
    }
}

func rawSum(_ db: ProtectedDatabase) throws -> Int64? {
    guard case .integer(let n)? = try db.rows(sum).first?.first else { return nil }
    return n
}

do {
    let domain = try ProtectionDomain.open(at: DomainLocation(home: args[1], deviceDirectory: args[2]), keyStore: .kernel(.session))
    let dir = args[3]
    if args.count == 5 && args[4] == "idle" {
        let db = try ProtectedDatabase.open(path: dir, protection: .none, files: domain.files)
        let count = { answer { if case .integer(let n)? = try db.rows("SELECT count(*) FROM t").first?.first { n } else { nil } } }
        let mode = try db.rows("PRAGMA journal_mode").first?.first
        print("READY \(count()) \(mode.map { if case .text(let t) = $0 { t } else { "?" } } ?? "?")")
        fflush(nil)
        while let line = readLine() {
            print(line == "check" ? count() : "unknown command \(line)")
            fflush(nil)
        }
        db.close()
        print("CLOSED")
        exit(0)
    }
    if args.count == 5 {
        _ = try DatabaseQueue()  // a plain in-memory GRDB database first: SQLite initializes (the same libsqlite3)
        let complete = answer { try ProtectedDatabase.open(path: dir + "/first-a.db", protection: .complete, files: domain.files).rows(sum).count == 0 ? 0 : 1 }
        let unlessOpen = answer { try ProtectedDatabase.open(path: dir + "/first-b.db", protection: .completeUnlessOpen, files: domain.files).rows("SELECT 1").count == 1 ? 1 : 0 }
        print("installed=\(ProtectedVFS.pageWipeInstalled) complete=\(complete) completeUnlessOpen=\(unlessOpen)")
        exit(0)
    }
    var a = try ProtectedDatabase.open(path: dir + "/a.db", protection: .complete, files: domain.files)
    try a.execute(fill("ARAW"))
    var g = try DatabasePool(protectedPath: dir + "/g.db", protection: .complete, files: domain.files)
    try g.write { try $0.execute(sql: fill("AGRDB")) }
    let b = try ProtectedDatabase.open(path: dir + "/b.db", protection: .completeUnlessOpen, files: domain.files)
    try b.execute(fill("BRAW"))
    let sums = [try rawSum(a), try g.read { try Int64.fetchOne($0, sql: sum) }, try rawSum(b)].map { "\($0 ?? -1)" }
    guard ProtectedVFS.pageWipeInstalled else {
        print("FAILED the page wipe is not installed")
        exit(70)
    }
    print("READY \(sums.joined(separator: " "))")
    fflush(nil)
    while let line = readLine() {
        switch line {
        case "check":
            print("araw=\(answer { try rawSum(a) }) agrdb=\(answer { try g.read { try Int64.fetchOne($0, sql: sum) } }) braw=\(answer { try rawSum(b) })")
        case "reopen":
            a.close()
            a = try ProtectedDatabase.open(path: dir + "/a.db", protection: .complete, files: domain.files)
            g = try DatabasePool(protectedPath: dir + "/g.db", protection: .complete, files: domain.files)
            let ok = try a.rows("PRAGMA integrity_check") == [[.text("ok")]] && g.read { try String.fetchOne($0, sql: "PRAGMA integrity_check") } == "ok"
            print("araw=\(answer { try rawSum(a) }) agrdb=\(answer { try g.read { try Int64.fetchOne($0, sql: sum) } }) integrity=\(ok ? "ok" : "FAILED")")
        default:
            print("unknown command \(line)")
        }
        fflush(nil)
    }
    withExtendedLifetime((domain, a, g, b)) {}
} catch {
    print("FAILED \(error)")
    exit(70)
}
