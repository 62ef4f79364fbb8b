import ArgumentParser
import DataProtection
import DataProtectionSQLite
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `dpctl repair`: crash recovery of protected files (keyless).
struct Repair: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Finish what a crash interrupted: roll journals back (or forward) and remove dead writers' temporary files.",
        discussion: """
            For each PATH (a protected file, or a directory walked recursively without following \
            symbolic links), applies or discards every rollback journal (.NAME.dpjournal) and removes \
            every temporary file (.NAME.dp.tmp, .NAME.dp-HEX.tmp) whose writer died. Journals and \
            temporary files held by a live writer are left alone and reported as in use. No key or \
            domain is needed, so it works while locked; it needs write access to the files.

            Then, for each protected SQLite database found with a journal, WAL or wal-index beside it, \
            lets SQLite finish what a crash left (a hot journal rolled back, the WAL checkpointed into \
            the database) and runs PRAGMA integrity_check; this step needs the domain (--home) and the \
            database's class unlocked, and refuses a database in use.

            Prints one line per file it acted on (rolled back, rolled forward, discarded journal, \
            removed, in use, database), and a summary on standard error. Exit status: 0 when nothing is left \
            to do, 79 when a live writer still holds something (run it again later), otherwise the \
            code of the first error (every PATH is still processed).
            """)
    @OptionGroup var domain: DomainOptions
    @Argument(help: "Protected files or directories.") var paths: [String]

    func validate() throws {
        guard !paths.isEmpty else { throw ValidationError("name at least one file or directory to repair") }
    }

    func run() throws {
        var total = RecoveryReport()
        var firstFailure: ProtectionError?
        for p in paths {
            let report: RecoveryReport
            do { report = try ProtectedFiles.recoverTree(p) } catch {
                note("dpctl: error: \(error.message)")
                firstFailure = firstFailure ?? error
                continue
            }
            for e in report.entries { print(Self.line(e)) }
            for f in report.failures { note("dpctl: error: \(f.message)") }
            firstFailure = firstFailure ?? report.failures.first
            total.merge(report)
        }
        // SQLite's own recovery of each database unit, after the chunk journals (it needs the key).
        // Candidates: protected files (by their magic, keyless) with a journal, WAL or wal-index beside them (a database
        // at rest is one file: nothing to do); the domain opens only when there is one, so a tree without any stays keyless.
        var databases = 0, databasesInUse = 0
        var opened: ProtectionDomain?
        let sides = DatabaseUnit.companionSuffixes + ["-shm"]
        for p in paths {
            do {
                let candidates = try collect([p]).filter { f in
                    !sides.contains { f.hasSuffix($0) } && sides.contains { FileManager.default.fileExists(atPath: f + $0) } && DatabaseUnit.looksProtected(f)
                }
                for db in candidates {
                    do {
                        if opened == nil { opened = try domain.open() }
                        guard let files = opened?.files, (try? files.info(db)) != nil else { continue }
                        let r = try DatabaseUnit.repair(db, files: files)
                        databases += 1
                        print("database \(r.journalRolledBack ? "journal rolled back, " : "")\(r.framesCheckpointed) WAL frames checkpointed, integrity \(r.integrity)\t\(db)")
                        if r.integrity != "ok" {
                            firstFailure = firstFailure ?? ProtectionError(.authenticationFailed, "unable to repair '\(db)': integrity_check: \(r.integrity); restore it from a backup", path: db)
                        }
                    } catch let e as ProtectionError where e.code == .coordinationFailed {
                        databasesInUse += 1
                        print("in use (database)\t\(db)")
                    } catch let e as ProtectionError {
                        note("dpctl: error: \(e.message)")
                        firstFailure = firstFailure ?? e
                    }
                }
            } catch {
                let e = error as? ProtectionError ?? ProtectionError(.io(EIO), "unable to repair '\(p)': \(error)", path: p)
                note("dpctl: error: \(e.message)")
                firstFailure = firstFailure ?? e
            }
        }
        note("repair: \(total.rolledBack) rolled back, \(total.rolledForward) rolled forward, \(total.journalsDiscarded) journals discarded, \(total.temporaryFilesRemoved) temporary files removed, \(total.inUse + databasesInUse) in use, \(databases) databases recovered")
        let exit: Exit = firstFailure.map { Exit($0.code) } ?? (total.inUse + databasesInUse > 0 ? .busy : .ok)
        fflush(nil)  // every stream: print() buffers standard output
        Glibc.exit(exit.rawValue)
    }

    /// One stable line per action: what was done, then the path.
    static func line(_ e: RecoveryReport.Entry) -> String {
        switch e.action {
        case .rolledBack(let n): "rolled back \(n) chunk\(n == 1 ? "" : "s")\t\(e.path)"
        case .rolledForward: "rolled forward\t\(e.path)"
        case .journalDiscarded: "discarded journal\t\(e.path)"
        case .journalInUse: "in use (journal)\t\(e.path)"
        case .temporaryFileRemoved: "removed\t\(e.path)"
        case .temporaryFileInUse: "in use\t\(e.path)"
        }
    }
}
