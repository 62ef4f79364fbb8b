import DataProtectionKeys
import DataProtectionFiles
import SystemLayer

#if canImport(Glibc)
import Glibc
#endif
internal import PathSyntax

/// What backup tools should copy from a container, and the conventions that tell them with no configuration.
///
/// Three layers, each honoured by the tools people use:
/// - `CACHEDIR.TAG` in `Library/Caches/` and `tmp/` (tar, restic, borg `--exclude-caches`);
/// - the per-item flag `user.dataprotection.exclude-from-backup` (an extended attribute;
///   a directory's flag covers everything inside it), kept across the library's atomic replaces;
/// - `excludeList(_:format:)`: an exclude file for restic, borg, rsync or GNU tar naming
///   every item the policy leaves out (the tags alone cannot name single files).
public enum BackupPolicy {
    /// The extended attribute that marks an item excluded from backup (value `1`).
    public static let excludeAttribute = "user.dataprotection.exclude-from-backup"
    /// FileCoordination's default lock directory at a coordination root: runtime state, never backed up.
    static let coordinationDirectoryName = ".coordination"
    /// The Cache Directory Tagging Specification's file name.
    public static let cacheDirectoryTagName = "CACHEDIR.TAG"
    /// The tag's contents: the signature line the specification requires, then a comment.
    public static let cacheDirectoryTag = """
        Signature: 8a477f597d28d172789f06886806bc55
        # This file is a cache directory tag created by swift-data-protection.
        # Backup tools skip this directory. See https://bford.info/cachedir/

        """

    /// The exclude-file dialects `excludeList` writes.
    public enum ExcludeFormat: String, CaseIterable, Sendable {
        /// `restic backup --exclude-file=LIST ROOT`: absolute paths, glob characters escaped.
        case restic
        /// `borg create --exclude-from=LIST REPO::NAME ROOT`: `pp:` path-prefix patterns.
        case borg
        /// `rsync -a --exclude-from=LIST ROOT/ DEST/`: paths anchored at the transfer root.
        case rsync
        /// `tar -C ROOT --anchored --no-wildcards --exclude-from=LIST -cf OUT .`: `./`-relative member names.
        case tar
    }

    /// The items a backup of the container at `root` copies and leaves out, with sizes (keyless; takes no lock).
    public static func plan(containerAt root: String) throws(ProtectionError) -> [BackupEntry] {
        let c: Confinement
        do throws(SystemError) { c = try Confinement(root: root) } catch { throw .errno(error.errno, "open the container", root) }
        return try plan(c)
    }

    /// The exclude list for `format` for the container at `root`, one pattern per line (absolute paths made from `root` as given).
    public static func excludeList(containerAt root: String, format: ExcludeFormat) throws(ProtectionError) -> String {
        let entries = try plan(containerAt: root)
        let base = droppingTrailingSeparators(isAbsolutePath(root) ? root : Container.currentDirectory() + "/" + root)
        // Only the top of each excluded subtree: the tools exclude a directory's contents with it.
        let excluded = entries.filter { !$0.isIncluded && !$0.isCoveredByParent }.map(\.path)
        return excluded.map { p in
            switch format {
            case .restic: escapeGlob(base + "/" + p)
            case .borg: "pp:" + base + "/" + p
            case .rsync: "/" + escapeGlob(p)
            case .tar: "./" + p
            }
        }.joined(separator: "\n") + (excluded.isEmpty ? "" : "\n")
    }

    static func plan(_ c: Confinement) throws(ProtectionError) -> [BackupEntry] {
        var out: [BackupEntry] = []
        func visit(_ path: String, _ st: stat, parentExcluded: Bool) throws(SystemError) {
            let isDir = st.st_mode & S_IFMT == S_IFDIR
            var reason: String?
            if parentExcluded {
                reason = "inside an excluded directory"
            } else if let d = ContainerDirectory(relativePath: path), !d.isBackedUp {
                reason = d == .bundle ? "the bundle is reinstalled, not restored" : "\(d.relativePath) is never backed up"
            } else if path == InUseLock.fileName || path == BackupPolicy.coordinationDirectoryName {
                reason = "runtime lock"
            } else if try flag(c, path, st) {
                reason = "excluded from backup (\(excludeAttribute))"
            }
            out.append(BackupEntry(path: path, size: isDir ? 0 : Int64(st.st_size), isDirectory: isDir, exclusionReason: reason, isCoveredByParent: parentExcluded))
            if isDir {
                for (name, child) in try c.entries(path, noSymlinks: true) {
                    try visit(path + "/" + name, child, parentExcluded: reason != nil)
                }
            }
        }
        do throws(SystemError) {
            for (name, st) in try c.entries(".", noSymlinks: true) { try visit(name, st, parentExcluded: false) }
        } catch { throw c.failure(error.errno, "plan the backup of", c.root) }
        return out
    }

    /// Whether `path` itself carries the exclude flag (symbolic links cannot carry user attributes).
    static func flag(_ c: Confinement, _ path: String, _ st: stat) throws(SystemError) -> Bool {
        let kind = st.st_mode & S_IFMT
        guard kind == S_IFREG || kind == S_IFDIR else { return false }
        let fd = try c.open(path, flags: O_RDONLY | O_NOFOLLOW | O_NONBLOCK | (kind == S_IFDIR ? O_DIRECTORY : 0), noSymlinks: true)
        defer { c.io.close(fd) }
        do throws(SystemError) {
            return try ExtendedAttributes.value(of: excludeAttribute, in: fd) == Array("1".utf8)
        } catch where error.errno == ENOTSUP { return false }
    }

    /// Sets or clears the flag on `path` (a file or directory beneath the root).
    static func setFlag(_ c: Confinement, _ path: String, _ excluded: Bool) throws(SystemError) {
        let st = try c.status(path)
        let kind = st.st_mode & S_IFMT
        guard kind == S_IFREG || kind == S_IFDIR else { throw SystemError(EINVAL) }
        let fd = try c.open(path, flags: O_RDONLY | O_NOFOLLOW | O_NONBLOCK | (kind == S_IFDIR ? O_DIRECTORY : 0))
        defer { c.io.close(fd) }
        if excluded {
            try ExtendedAttributes.set(excludeAttribute, to: Array("1".utf8), in: fd)
        } else {
            try ExtendedAttributes.remove(excludeAttribute, in: fd)
        }
    }

    /// Escapes the glob characters restic's and rsync's patterns give meaning to.
    static func escapeGlob(_ s: String) -> String {
        var out = ""
        for ch in s {
            if "*?[]\\".contains(ch) { out.append("\\") }
            out.append(ch)
        }
        return out
    }
}

/// One item of a backup plan.
public struct BackupEntry: Sendable, Equatable {
    /// The path relative to the container root.
    public let path: String
    /// Bytes on disk (ciphertext for protected files); 0 for directories.
    public let size: Int64
    public let isDirectory: Bool
    /// Why the item is left out; nil when it is backed up.
    public let exclusionReason: String?
    /// Left out because a directory above it is.
    public let isCoveredByParent: Bool

    public var isIncluded: Bool { exclusionReason == nil }
}

extension Container {
    /// Marks `path` (a file or directory) excluded from backup, or clears the mark; persisted as an extended attribute.
    ///
    /// The library's atomic replaces copy the attribute to the new file, so
    /// rewriting a file keeps it excluded (Apple's version resets on some writes).
    /// - Throws: `.escapesContainer`; `.io(ENOTSUP)` where the filesystem lacks user attributes.
    public func setExcludedFromBackup(_ excluded: Bool, for path: String) throws(ProtectionError) {
        if try directory(containing: path, "mark") == .bundle {
            throw ProtectionError(.readOnly, "unable to mark '\(path)': the bundle is read-only and never backed up", path: path)
        }
        do throws(SystemError) { try BackupPolicy.setFlag(confinement, path, excluded) } catch { throw confinement.failure(error.errno, "mark", path) }
    }

    /// Whether a backup leaves `path` out: its own flag, a flagged directory above it, or its directory's policy.
    public func isExcludedFromBackup(_ path: String) throws(ProtectionError) -> Bool {
        do throws(SystemError) {
            var prefix = ""
            for part in pathComponents(of: path) {
                prefix = prefix.isEmpty ? String(part) : prefix + "/" + part
                if let d = ContainerDirectory(relativePath: prefix), !d.isBackedUp { return true }
                if try BackupPolicy.flag(confinement, prefix, try confinement.status(prefix)) { return true }
            }
            return false
        } catch { throw confinement.failure(error.errno, "inspect", path) }
    }

    /// This container's backup plan (see `BackupPolicy.plan(containerAt:)`).
    public func backupPlan() throws(ProtectionError) -> [BackupEntry] { try BackupPolicy.plan(confinement) }
}
