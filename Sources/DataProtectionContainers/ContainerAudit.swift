import DataProtectionKeys
import DataProtectionFiles
import DataProtectionFormat
import SystemLayer

#if canImport(Glibc)
import Glibc
#endif

extension ContainerDirectory {
    /// Whether the container's policy expects every file in it to be protected (a `audit` finds the others):
    /// Documents (with its Inbox), Application Support and Preferences, which hold the app's data and are backed up.
    public var expectsProtection: Bool {
        switch self {
        case .documents, .inbox, .applicationSupport, .preferences: true
        case .bundle, .library, .caches, .temporary: false
        }
    }
}

/// One item that is not a protected file where the container's policy expects one.
public struct AuditFinding: Sendable, Equatable, CustomStringConvertible {
    /// What was found.
    public enum Kind: String, Sendable {
        /// A regular file without a valid protected-file header (whatever its name): its bytes are readable as they are.
        case plaintext
        /// A symbolic link: never followed by the audit or the library.
        case symbolicLink
        /// A FIFO, socket or device: never opened for reading (it could block or have side effects).
        case specialFile
        /// A regular file with more than one hard link: it may be a file outside the container.
        case hardLinked
    }
    /// The item's path relative to the container root.
    public let path: String
    public let kind: Kind
    /// The directory whose policy applies.
    public let directory: ContainerDirectory
    /// The class the policy gives new files there (what `dpctl protect` should use).
    public let expectedClass: ProtectionClass
    /// The container root, absolute.
    public let root: String

    /// The command (or step) that fixes it.
    public var fix: String {
        let p = shellQuoted(root + "/" + path)
        switch kind {
        case .plaintext: return "dpctl protect --class \(expectedClass.name) \(p)"
        case .symbolicLink, .specialFile: return "rm \(p)  (then write the data through the library)"
        case .hardLinked: return "cp --remove-destination \(p) \(p)  (a private copy), then: dpctl protect --class \(expectedClass.name) \(p)"
        }
    }

    public var description: String {
        let what: String
        switch kind {
        case .plaintext: what = "is plaintext"
        case .symbolicLink: what = "is a symbolic link"
        case .specialFile: what = "is a special file (FIFO, socket or device)"
        case .hardLinked: what = "has more than one hard link"
        }
        return "'\(path)' \(what) where the policy expects \(expectedClass.name) (\(directory.relativePath)); run `\(fix)`"
    }
}

/// Lists the items of a container that are not protected files where its policy expects protection.
///
/// Reads the container without keys (it works while locked): each item is classified from `lstat` and, for a regular
/// file, from the first bytes read through a descriptor opened beneath the root with `O_NOFOLLOW | O_NONBLOCK`, so a
/// planted link is reported, never followed, and a FIFO is reported, never waited on. A file is protected when its
/// bytes parse as a protected-file header (or, at a journal's name, a rollback journal's); names prove nothing, so a
/// plaintext file named like a temporary file or journal is reported too.
public enum ContainerAudit {
    /// The findings for the container at `root`, sorted by path.
    /// - Throws: `.notFound`/`.io` when the container or a standard directory cannot be read; `.invalidArgument`
    ///   for a malformed policy file.
    public static func run(containerAt root: String) throws(ProtectionError) -> [AuditFinding] {
        let absolute = root.hasPrefix("/") ? root : Container.currentDirectory() + "/" + root
        let c: Confinement
        do throws(SystemError) { c = try Confinement(root: absolute) } catch { throw .errno(error.errno, "audit the container", absolute) }
        let text: [UInt8]
        do throws(SystemError) { text = try c.readFile(Container.policyFileName, limit: 64 << 10) } catch { throw c.failure(error.errno, "read the policy of", Container.policyFileName) }
        guard let policy = ContainerPolicy(encoded: String(decoding: text, as: UTF8.self)) else {
            throw ProtectionError(.invalidArgument, "unable to audit the container '\(absolute)': its '\(Container.policyFileName)' is malformed; restore it from a backup", path: absolute)
        }
        return try run(c, policy)
    }

    static func run(_ c: Confinement, _ policy: ContainerPolicy) throws(ProtectionError) -> [AuditFinding] {
        var out: [AuditFinding] = []
        // Deepest directories first, so Documents/Inbox wins over Documents.
        let dirs = ContainerDirectory.allCases.sorted { $0.relativePath.count > $1.relativePath.count }
        for top in ContainerDirectory.allCases where top.expectsProtection && top != .inbox {
            do throws(SystemError) {
                try c.walk(top.relativePath) { (p, st) throws(SystemError) in
                    guard let d = dirs.first(where: { p.hasPrefix($0.relativePath + "/") }), d.expectsProtection else { return }
                    if let kind = try classify(c, p, st) {
                        out.append(AuditFinding(path: p, kind: kind, directory: d, expectedClass: policy.defaultClass(for: d), root: c.root))
                    }
                }
            } catch { throw c.failure(error.errno, "audit", top.relativePath) }
        }
        return out.sorted { $0.path < $1.path }
    }

    /// The finding for one item, nil when it is a directory or a protected file.
    private static func classify(_ c: Confinement, _ path: String, _ st: stat) throws(SystemError) -> AuditFinding.Kind? {
        switch st.st_mode & S_IFMT {
        case S_IFDIR: return nil
        case S_IFLNK: return .symbolicLink
        case S_IFREG: break
        default: return .specialFile
        }
        let fd: Int32
        do throws(SystemError) { fd = try c.open(path, flags: O_RDONLY | O_NOFOLLOW | O_NONBLOCK, noSymlinks: true) } catch {
            switch error.errno {
            case ELOOP: return .symbolicLink  // replaced since the listing
            case EMLINK: return .hardLinked
            case ENOENT: return nil  // removed since the listing
            default: throw error
            }
        }
        defer { c.io.close(fd) }
        let now = try c.io.fullStatus(fd)
        guard now.st_mode & S_IFMT == S_IFREG else { return .specialFile }
        var head = [UInt8](repeating: 0, count: max(FileHeader.size, JournalFormat.headerSize))
        var filled = 0
        while filled < head.count {
            let n = try head.withUnsafeMutableBytes { b in
                Result { () throws(SystemError) in try c.io.read(fd, into: UnsafeMutableRawBufferPointer(rebasing: b[filled...])) }
            }.get()
            if n == 0 { break }
            filled += n
        }
        let bytes = Array(head[..<filled])
        if (try? FileHeader.parse(bytes)) != nil { return nil }
        let name = path.split(separator: "/").last.map(String.init) ?? path
        if name.hasPrefix("."), name.hasSuffix(".dpjournal"), JournalFormat.parseHeader(bytes) != nil { return nil }
        return .plaintext
    }
}

/// `s` in single quotes for a POSIX shell.
func shellQuoted(_ s: String) -> String { "'" + s.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'" }

extension Container {
    /// The items that are not protected files where this container's policy expects protection (see `ContainerAudit`).
    /// - Throws: what `ContainerAudit.run(containerAt:)` throws.
    public func audit() throws(ProtectionError) -> [AuditFinding] { try ContainerAudit.run(confinement, policy) }
}
