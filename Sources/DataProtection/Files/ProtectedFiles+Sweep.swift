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

    mutating func add(_ path: String, _ sweep: TempSweep) {
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
        "\(parentDirectory(of: path))/.\(lastComponent(of: path)).dp.tmp"
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
        try Self.recoverTree(path, io: io)
    }

    /// `recoverTree(_:)` without a `ProtectedFiles` (no keys are needed): for tools that have no domain at hand.
    public static func recoverTree(_ path: String) throws(ProtectionError) -> RecoveryReport {
        try recoverTree(path, io: SystemFileIO())
    }

    /// `recoverTree(_:)` through the fault-injection seam `io` (package-level, for tests).
    package static func recoverTree(_ path: String, io: any FileIO) throws(ProtectionError) -> RecoveryReport {
        var report = RecoveryReport()
        var st = stat()
        let exists = lstat(path, &st) == 0
        if exists && (st.st_mode & S_IFMT) == S_IFDIR {
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
        do throws(OwnedFileFailure) { report.add(file, try TempSweeper(io: io).sweep(file)) } catch {
            report.failures.append(error.error("remove the temporary file", file, at: file, fix: "it is not a temporary file of ours, so it was left alone; remove it yourself (`rm -r '\(file)'`)"))
        }
    }

    /// Removes the deterministic temporary file of `path` if its writer died: one failed `open` when there is none.
    func sweepTemporary(of path: String) throws(ProtectionError) {
        let tmp = Self.temporaryPath(for: path)
        do throws(OwnedFileFailure) { _ = try TempSweeper(io: io).sweep(tmp) } catch {
            throw error.error("remove the temporary file", tmp, at: tmp, fix: "it is not a temporary file of ours, so it was left alone; remove it yourself (`rm -r '\(tmp)'`)")
        }
    }

    /// A new name for a replace's temporary file when the deterministic one is taken: `.<name>.dp-<hex>.tmp`.
    static func randomTemporaryPath(for path: String) -> String {
        let suffix = (try? SecureRandom.bytes(6))?.map { String($0, radix: 16) }.joined() ?? String(getpid())
        return "\(parentDirectory(of: path))/.\(lastComponent(of: path)).dp-\(suffix).tmp"
    }

    /// Creates the temporary file of a replace of `path` under a name it owns, and locks it (FORMAT.md §6.6).
    ///
    /// First `.<name>.dp.tmp`; if it exists and its writer is dead (its lock can be
    /// taken) it is removed and the name reused, so a crashed writer's litter goes
    /// with the next write. If a live writer holds it, a random
    /// `.<name>.dp-<hex>.tmp` is used instead. The lock is taken on the new file's
    /// own descriptor, so it lasts until the caller closes that, after its rename.
    /// - Parameters:
    ///   - create: makes a new file at the name with `O_EXCL` (`.alreadyExists` if taken).
    ///   - descriptor: the new file's descriptor.
    ///   - abandon: closes a new file that turned out not to be ours, without unlinking it.
    func claimTemporary<T>(
        for path: String, create: (String) throws(ProtectionError) -> T, descriptor: (T) -> Int32, abandon: (T) -> Void
    ) throws(ProtectionError) -> (T, String) {
        let fixed = Self.temporaryPath(for: path)
        var swept = false
        for attempt in 0..<5 {
            let tmp = attempt == 0 || (attempt == 1 && swept) ? fixed : Self.randomTemporaryPath(for: path)
            let made: T
            do throws(ProtectionError) { made = try create(tmp) } catch {
                guard error.code == .alreadyExists else { throw error.retargeted(path, "write") }
                if attempt == 0 { swept = (try? TempSweeper(io: io).sweep(fixed)) == .removed }
                continue
            }
            // A sweeper may have locked and unlinked the new file before this lock (nobody held it
            // yet, so it looked dead); then the name is gone or names another writer's file.
            let claimed: Bool
            do throws(SystemError) {
                let fd = descriptor(made)
                if try io.tryLockExclusive(fd) {
                    // Once more on failure: a transient fault here would strand the file (not knowing
                    // whether the name is still ours, we may not unlink it).
                    do { claimed = try io.names(tmp, fd) } catch { claimed = try io.names(tmp, fd) }
                } else {
                    claimed = false
                }
            } catch {
                abandon(made)
                throw ProtectionError.errno(error.errno, "lock the temporary file of", path)
            }
            if claimed { return (made, tmp) }
            abandon(made)  // the sweeper removes it: not ours to touch
        }
        throw ProtectionError(.io(EBUSY), "unable to write '\(path)': no temporary name beside it could be claimed (other writers keep taking them); try again", path: path)
    }
}

/// The journal and temporary-file names (FORMAT.md §6.6–6.7), and the file each is about.
struct InternalName: Equatable {
    enum Kind { case journal, temporary, randomTemporary }
    var kind: Kind
    /// The protected file's last component.
    var target: String

    init?(_ name: String) {
        guard name.hasPrefix(".") else { return nil }
        let body = name.dropFirst()
        if body.hasSuffix(".dpjournal") {
            (kind, target) = (.journal, String(body.dropLast(10)))
        } else if body.hasSuffix(".dp.tmp") {
            (kind, target) = (.temporary, String(body.dropLast(7)))
        } else if body.hasSuffix(".tmp"), let r = body.dropLast(4).ranges(of: ".dp-").last {
            let hex = body[r.upperBound..<body.index(body.endIndex, offsetBy: -4)]
            guard !hex.isEmpty, hex.allSatisfy(\.isHexDigit) else { return nil }
            (kind, target) = (.randomTemporary, String(body[..<r.lowerBound]))
        } else {
            return nil
        }
        if target.isEmpty { return nil }
    }
}

/// What a sweep found at one temporary name.
enum TempSweep: Equatable { case absent, removed, inUse }

/// Removes temporary files that whole-file writers died with (FORMAT.md §6.6). Keyless; all I/O through the seam.
///
/// A writer holds an exclusive OFD lock on its temporary file from just after
/// creating it until after the rename; the kernel drops the lock when the
/// writer dies. A file whose lock can be taken therefore has no live writer.
///
/// Security: only a regular file with one link is ever removed (`openOwned`): a
/// symbolic link, a hard link to someone's file, a FIFO or a directory planted at
/// a temporary name is left alone and reported, never followed or unlinked.
/// Its owner may be anyone: a dead writer's file is its writer's, and whoever may
/// unlink names in the directory may remove it anyway.
struct TempSweeper {
    let io: any FileIO

    func sweep(_ tmp: String) throws(OwnedFileFailure) -> TempSweep {
        for _ in 0..<3 {
            let fd: Int32
            do throws(OwnedFileFailure) { fd = try io.openOwned(tmp, flags: O_RDWR, owner: .anyone) } catch .system(let e) where e.errno == ENOENT {
                return .absent
            }
            defer { io.close(fd) }
            do throws(SystemError) {
                guard try io.tryLockExclusive(fd) else { return .inUse }
                // Between our open and our lock its writer may have renamed it into place
                // and another writer made a new file under the name: that one is not ours to judge.
                guard try io.names(tmp, fd) else { continue }
                // Holding the lock of the file the name names, nobody else can change the name.
                do { try io.unlink(tmp) } catch where error.errno == ENOENT {}
            } catch { throw .system(error) }
            return .removed
        }
        return .inUse
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
