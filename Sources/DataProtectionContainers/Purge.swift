import DataProtectionKeys
import DataProtectionFiles
import SystemLayer
import DataProtectionTelemetry

#if canImport(Glibc)
import Glibc
#endif

/// What `Purge.run` should do.
public struct PurgeOptions: Sendable {
    /// How much to delete.
    public enum Target: Sendable, Equatable {
        /// Everything purgeable.
        case all
        /// Oldest first, until the container's filesystem has more than this many bytes free.
        case untilFreeBytes(Int64)
    }

    public var target: Target
    /// Wait for a container in use to be released instead of skipping it.
    public var waitIfInUse: Bool
    /// The purgeable directories to purge (tmp and Caches by default).
    public var directories: [ContainerDirectory]
    /// The file coordination whose readers and writers protect an item from purge.
    public var coordination: ContainerCoordination
    /// Where the purge is logged (what it removed, skipped and freed; paths, never contents): a domain's
    /// `telemetry`, or nil for no logs.
    public var telemetry: Telemetry?

    public init(
        target: Target = .all, waitIfInUse: Bool = false, directories: [ContainerDirectory] = [.temporary, .caches],
        coordination: ContainerCoordination = .machineWide, telemetry: Telemetry? = nil
    ) {
        self.telemetry = telemetry
        self.target = target
        self.waitIfInUse = waitIfInUse
        self.directories = directories
        self.coordination = coordination
    }
}

/// What a purge did.
public struct PurgeReport: Sendable, Equatable {
    /// The container was in use and was skipped: nothing was removed.
    public var skippedInUse = false
    /// Removed items (container-relative paths) with their sizes, in removal order.
    public var removed: [(path: String, size: Int64)] = []
    /// Items left because they were being written.
    public var skippedBusy: [String] = []
    /// Bytes free on the container's filesystem afterwards.
    public var freeBytesAfter: Int64 = 0

    public var freedBytes: Int64 { removed.reduce(0) { $0 + $1.size } }

    public static func == (a: PurgeReport, b: PurgeReport) -> Bool {
        a.skippedInUse == b.skippedInUse && a.removed.map(\.path) == b.removed.map(\.path) && a.removed.map(\.size) == b.removed.map(\.size)
            && a.skippedBusy == b.skippedBusy && a.freeBytesAfter == b.freeBytesAfter
    }
}

/// Deletes the purgeable contents of containers (tmp and Caches), never while a container is in use.
///
/// Purge takes the container's in-use lock exclusive, so it cannot run while
/// any process has the container open. Within the lock it still leaves any
/// item under coordinated access (each delete is a coordinated `forDeleting`
/// write that gives up at once) and any file open for writing through the
/// container layer (it carries a shared OFD lock, probed here).
/// `CACHEDIR.TAG` is kept.
public enum Purge {
    /// Purges the container at `root`.
    /// - Throws: `.notFound`, `.escapesContainer`, `.io` (the report of a partial purge is lost; rerun it).
    public static func run(containerAt root: String, options: PurgeOptions = .init()) throws(ProtectionError) -> PurgeReport {
        let t0 = Telemetry.now()
        let report = try run(containerAt: root, options: options, freeBytes: freeBytes)
        guard let telemetry = options.telemetry else { return report }
        for item in report.removed {
            telemetry.log(.debug, "purged item", ["path": .string(root + "/" + item.path), "size": .stringConvertible(item.size), "operation": "purge"])
        }
        telemetry.log(.info, report.skippedInUse ? "purge skipped: container in use" : "purged container", [
            "path": .string(root), "operation": "purge", "removed": .stringConvertible(report.removed.count),
            "freedBytes": .stringConvertible(report.freedBytes), "skippedBusy": .stringConvertible(report.skippedBusy.count),
            "freeBytesAfter": .stringConvertible(report.freeBytesAfter), "duration_ms": Telemetry.millis(Telemetry.elapsed(since: t0)),
        ])
        return report
    }

    /// `run` with the free-space measurement as a seam (tests model a nearly full filesystem).
    static func run(containerAt root: String, options: PurgeOptions, freeBytes: (Confinement) -> Int64) throws(ProtectionError) -> PurgeReport {
        let c: Confinement
        do throws(SystemError) { c = try Confinement(root: root) } catch { throw .errno(error.errno, "open the container", root) }
        var report = PurgeReport()
        guard let lock = try InUseLock.exclusive(c, wait: options.waitIfInUse) else {
            report.skippedInUse = true
            report.freeBytesAfter = freeBytes(c)
            return report
        }
        defer { lock.release() }
        var candidates: [(path: String, mtime: timespec, size: Int64, isFile: Bool)] = []
        for d in options.directories where d.isPurgeable {
            do throws(SystemError) {
                try c.walk(d.relativePath) { (p, st) throws(SystemError) in
                    let kind = st.st_mode & S_IFMT
                    guard kind != S_IFDIR, p != d.relativePath + "/" + BackupPolicy.cacheDirectoryTagName else { return }
                    candidates.append((p, st.st_mtim, Int64(st.st_size), kind == S_IFREG))
                }
            } catch { throw c.failure(error.errno, "list", d.relativePath) }
        }
        candidates.sort { ($0.mtime.tv_sec, $0.mtime.tv_nsec, $0.path) < ($1.mtime.tv_sec, $1.mtime.tv_nsec, $1.path) }
        for item in candidates {
            if case .untilFreeBytes(let want) = options.target, freeBytes(c) > want { break }
            let busy: Bool
            do throws(SystemError) { busy = item.isFile ? try isBeingWritten(c, item.path) : false } catch where error.errno == ENOENT {
                continue  // gone meanwhile
            } catch { throw c.failure(error.errno, "purge", item.path) }
            let removed = busy ? false : try removeUncontended(c, item.path, coordination: options.coordination)
            if !removed {
                report.skippedBusy.append(item.path)
                continue
            }
            report.removed.append((item.path, item.size))
        }
        for d in options.directories where d.isPurgeable { removeEmptyDirectories(c, d.relativePath) }
        report.freeBytesAfter = freeBytes(c)
        return report
    }

    /// Empties `directory` (except its `CACHEDIR.TAG`) of a container the caller holds exclusively.
    static func clear(_ directory: ContainerDirectory, in c: Confinement) throws(ProtectionError) {
        do throws(SystemError) {
            for (name, _) in try c.entries(directory.relativePath, noSymlinks: true) where name != BackupPolicy.cacheDirectoryTagName {
                try c.removeTree(directory.relativePath + "/" + name)
            }
        } catch { throw c.failure(error.errno, "clear", directory.relativePath) }
    }

    /// Whether the file at `path` is open for writing through a container (a shared OFD lock on it).
    static func isBeingWritten(_ c: Confinement, _ path: String) throws(SystemError) -> Bool {
        let fd = try c.open(path, flags: O_RDONLY | O_NOFOLLOW | O_NONBLOCK, noSymlinks: true)
        defer { c.io.close(fd) }
        switch OFDLock.isLocked(fd: fd, .exclusive, start: 0, length: 0) {
        case .done: return false
        case .wouldBlock: return true
        case .failed(let code): throw SystemError(code)
        }
    }

    /// Bytes available to unprivileged users on the container's filesystem.
    static func freeBytes(_ c: Confinement) -> Int64 {
        (try? c.io.availableBytes(onFileSystemOf: c.rootFD)) ?? 0
    }

    /// Removes the now-empty subdirectories below `path` (never `path` itself).
    private static func removeEmptyDirectories(_ c: Confinement, _ path: String) {
        try? c.walk(path) { (p, st) throws(SystemError) in
            if st.st_mode & S_IFMT == S_IFDIR { try? c.remove(p, directory: true) }
        }
    }
}

extension Container {
    /// Empties this container's `tmp/` (except its tag) when no other process holds the container.
    /// - Returns: whether it was cleared (false: another process uses the container).
    @discardableResult
    public func clearTemporaryDirectory() throws(ProtectionError) -> Bool {
        // Upgrade through the descriptor that holds our shared lock: another descriptor would conflict with it.
        let cleared = try inUse.withExclusive { () throws(ProtectionError) in try Purge.clear(.temporary, in: confinement) }
        files.telemetry.log(.info, cleared ? "cleared the container's tmp" : "tmp not cleared: container in use", [
            "path": .string(root), "operation": "purge", "directory": "tmp",
        ])
        return cleared
    }
}
