import ArgumentParser
import DataProtection
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

            Prints one line per file it acted on (rolled back, rolled forward, discarded journal, \
            removed, in use), and a summary on standard error. Exit status: 0 when nothing is left \
            to do, 79 when a live writer still holds something (run it again later), otherwise the \
            code of the first error (every PATH is still processed).
            """)
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
        note("repair: \(total.rolledBack) rolled back, \(total.rolledForward) rolled forward, \(total.journalsDiscarded) journals discarded, \(total.temporaryFilesRemoved) temporary files removed, \(total.inUse) in use")
        let exit: Exit = firstFailure.map { Exit($0.code) } ?? (total.inUse > 0 ? .busy : .ok)
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
