import DataProtectionKeys
import SystemLayer
import ProtectionCrypto

#if canImport(Glibc)
import Glibc
#endif
internal import PathSyntax

/// What `ProtectedFiles.recoverTree(_:)` found and did, file by file.
public struct RecoveryReport: Sendable {
    /// One thing recovery did, or left alone.
    public enum Action: Sendable, Equatable {
        /// An interrupted in-place change was undone (`chunks` chunks put back).
        case rolledBack(chunks: Int)
        /// An interrupted truncate was completed.
        case rolledForward
        /// An empty, torn or stale journal was removed; the file was already as committed.
        case journalDiscarded
        /// A live handle owns the journal: left alone.
        case journalInUse
        /// A whole-file writer died with this temporary file: removed.
        case temporaryFileRemoved
        /// A live whole-file writer is filling this temporary file: left alone.
        case temporaryFileInUse
    }

    /// An action and the file it was about: the protected file for journal actions, the temporary file for the others.
    public struct Entry: Sendable, Equatable {
        public var path: String
        public var action: Action
    }

    /// Everything done or left alone, in walk order.
    public internal(set) var entries: [Entry] = []
    /// Files whose recovery failed (the walk went on); their journal or temporary file stays for the next attempt.
    public internal(set) var failures: [ProtectionError] = []

    public var rolledBack: Int { entries.count { if case .rolledBack = $0.action { true } else { false } } }
    public var rolledForward: Int { entries.count { $0.action == .rolledForward } }
    public var journalsDiscarded: Int { entries.count { $0.action == .journalDiscarded } }
    public var temporaryFilesRemoved: Int { entries.count { $0.action == .temporaryFileRemoved } }
    /// Journals and temporary files that live writers own.
    public var inUse: Int { entries.count { $0.action == .journalInUse || $0.action == .temporaryFileInUse } }

    public init() {}

    /// Appends `other`'s entries and failures (reports of several walks, as one).
    public mutating func merge(_ other: RecoveryReport) {
        entries += other.entries
        failures += other.failures
    }

    mutating func add(_ path: String, _ outcome: JournalRecovery) {
        switch outcome {
        case .nothingToDo: return
        case .rolledBack(let n): entries.append(Entry(path: path, action: .rolledBack(chunks: n)))
        case .rolledForward: entries.append(Entry(path: path, action: .rolledForward))
        case .discarded: entries.append(Entry(path: path, action: .journalDiscarded))
        case .inUse: entries.append(Entry(path: path, action: .journalInUse))
        }
    }

    mutating func add(_ path: String, _ sweep: TemporarySweep) {
        switch sweep {
        case .absent: return
        case .removed: entries.append(Entry(path: path, action: .temporaryFileRemoved))
        case .inUse: entries.append(Entry(path: path, action: .temporaryFileInUse))
        }
    }
}

extension ProtectedFiles {
    /// The temporary name a whole-file write of `path` uses first: `.<name>.dp.tmp` beside it (FORMAT.md §6.6).
    public static func temporaryPath(for path: String) -> String {
        "\(parentDirectory(of: path))/\(AtomicReplace.temporaryName(for: lastComponent(of: path)))"
    }

    /// Whether `name` (a last path component) is a journal or a whole-file writer's temporary file,
    /// not a protected file of its own: tree walks (`ls`, `protect`) skip these.
    public static func isInternalFile(named name: String) -> Bool { InternalName(name) != nil }

    /// Recovers every protected file in a directory tree, or one file, after a crash (FORMAT.md §6.6–6.7).
    ///
    /// Walks `path` (symbolic links are not followed). Every rollback journal
    /// found is applied or discarded as `recover(_:)` does, and every temporary
    /// file a whole-file writer died with is removed, whatever its name (the
    /// deterministic `.<name>.dp.tmp` and the random `.<name>.dp-<hex>.tmp`). Journals
    /// and temporary files whose writer is alive (it holds their lock) are left
    /// alone and reported as in use. For a file, its journal and its temporary
    /// files (found by listing its directory) are handled.
    ///
    /// Keyless, so it works while the domain is locked; it needs write access to the
    /// directories. Temporary files of versions before the lock rule (they were never
    /// locked) look dead: run this when no writer of such a version is running.
    /// - Returns: what was done, file by file, with failures collected (the walk goes on).
    /// - Throws: `.notFound` if nothing exists at `path`; `.io` if a directory cannot be listed.
    public func recoverTree(_ path: String) throws(ProtectionError) -> RecoveryReport {
        let report = try Self.recoverTree(path, io: io)
        reportRepairs(report, under: path)
        return report
    }

    /// `recoverTree(_:)` without a `ProtectedFiles` (no keys are needed): for tools that have no domain at hand.
    public static func recoverTree(_ path: String) throws(ProtectionError) -> RecoveryReport {
        try recoverTree(path, io: SystemFileIO())
    }

    /// `recoverTree(_:)` through the fault-injection seam `io` (package-level, for tests).
    package static func recoverTree(_ path: String, io: any FileIO) throws(ProtectionError) -> RecoveryReport {
        var report = RecoveryReport()
        let st = try? io.linkStatus(path)
        let exists = st != nil
        if let st, (st.st_mode & S_IFMT) == S_IFDIR {
            try FileTree.walk(path) { (f) throws(ProtectionError) in recoverEntry(f, io: io, into: &report) }
            return report
        }
        if InternalName(lastComponent(of: path)) != nil {
            recoverEntry(path, io: io, into: &report)
        } else {
            do throws(ProtectionError) {
                report.add(path, try JournalRecoverer(io: io, dataPath: path).run())
            } catch { report.failures.append(error.about(path, "recover")) }
            let dir = parentDirectory(of: path), name = lastComponent(of: path)
            for n in (try? FileTree.names(in: dir)) ?? [] {
                guard let i = InternalName(n), i.target == name, i.kind != .journal else { continue }
                recoverEntry(dir == "/" ? "/\(n)" : "\(dir)/\(n)", io: io, into: &report)
            }
        }
        if !exists && report.entries.isEmpty && report.failures.isEmpty { throw ProtectionError.errno(ENOENT, "recover", path) }
        return report
    }

    /// Handles one file met by the walk: a journal is recovered, a temporary file swept, anything else left.
    private static func recoverEntry(_ file: String, io: any FileIO, into report: inout RecoveryReport) {
        guard let i = InternalName(lastComponent(of: file)) else { return }
        let dir = parentDirectory(of: file)
        let target = dir == "/" ? "/\(i.target)" : "\(dir)/\(i.target)"
        if i.kind == .journal {
            do throws(ProtectionError) { report.add(target, try JournalRecoverer(io: io, dataPath: target).run()) } catch {
                report.failures.append(error.about(target, "recover"))
            }
            return
        }
        do throws(OwnedFileFailure) { report.add(file, try AtomicReplace.sweep(file, io: io)) } catch {
            report.failures.append(error.error("remove the temporary file", file, at: file, fix: "it is not a temporary file of ours, so it was left alone; remove it yourself (`rm -r '\(file)'`)"))
        }
    }

    /// Removes the deterministic temporary file of `path` if its writer died: one failed `open` when there is none.
    func sweepTemporary(of path: String) throws(ProtectionError) {
        let tmp = Self.temporaryPath(for: path)
        do throws(OwnedFileFailure) { _ = try AtomicReplace.sweep(tmp, io: io) } catch {
            throw error.error("remove the temporary file", tmp, at: tmp, fix: "it is not a temporary file of ours, so it was left alone; remove it yourself (`rm -r '\(tmp)'`)")
        }
    }
}

/// The journal and temporary-file names (FORMAT.md §6.6–6.7), and the file each is about.
struct InternalName: Equatable {
    enum Kind { case journal, temporary, randomTemporary }
    var kind: Kind
    /// The protected file's last component.
    var target: String

    init?(_ name: String) {
        if name.hasPrefix("."), name.hasSuffix(".dpjournal") {
            (kind, target) = (.journal, String(name.dropFirst().dropLast(10)))
            if target.isEmpty { return nil }
        } else if let t = AtomicReplace.target(ofTemporary: name) {
            (kind, target) = (name.hasSuffix(".dp.tmp") ? .temporary : .randomTemporary, t)
        } else {
            return nil
        }
    }
}

extension FileIO {
    /// Whether `path` names the file open as `fd` (same device and inode).
    func names(_ path: String, _ fd: Int32) throws(SystemError) -> Bool {
        let other: Int32
        do { other = try open(path, flags: O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, mode: 0) } catch where error.errno == ENOENT || error.errno == ELOOP { return false }
        defer { close(other) }
        return try identity(other) == identity(fd)
    }
}
