// A coordination domain: a root directory whose items are coordinated through one lock directory.
internal import SystemLayer
internal import Glibc
import Foundation
import Locking
internal import PathSyntax

/// A tree of items coordinated together, and the lock directory that coordinates them.
///
/// Every process that opens a domain with the same lock directory coordinates with every other.
/// By default the lock directory is `<root>/.coordination`, so processes on other hosts that see the
/// root through NFSv4 or CephFS coordinate too; pass a local directory (for example under
/// `$XDG_RUNTIME_DIR`) when the root is on a filesystem where locks do not hold.
public struct CoordinationDomain: Sendable {
    let state: DomainState

    /// The root directory; coordinated items must lie inside it.
    public var root: URL { URL(fileURLWithPath: state.root, isDirectory: true) }
    /// The directory that holds the lock file and the presenter rendezvous.
    public var lockDirectory: URL { URL(fileURLWithPath: state.lockDirectory, isDirectory: true) }
    /// The verdict on the lock directory's filesystem.
    public var lockSupport: LockSupport { state.lockSupport }

    /// Opens (creating if needed) the domain rooted at `root`.
    /// - Parameters:
    ///   - root: an existing directory; items outside it cannot be coordinated in this domain.
    ///   - lockDirectory: where the lock file lives; default `<root>/.coordination`.
    ///   - allowUnreliableLocks: open even when the lock directory's filesystem does not honour OFD locks.
    /// - Throws: `CoordinationError` with `.lockDirectoryUnavailable` when the directories cannot be
    ///   created or opened, `.locksUnreliable` (naming the filesystem) when locks would not hold.
    public init(root: URL, lockDirectory: URL? = nil, allowUnreliableLocks: Bool = false) throws(CoordinationError) {
        guard root.isFileURL, let rootPath = LockLayout.normalize(root.path(percentEncoded: false)) else {
            throw CoordinationError(
                .invalidRequest, path: root.absoluteString, message: "the domain root must be an absolute file URL")
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: rootPath, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw CoordinationError(
                .invalidRequest, path: rootPath,
                message: "the domain root '\(rootPath)' is not an existing directory; create it first")
        }
        let resolvedRoot = Self.realPath(rootPath) ?? rootPath
        let lockPath = LockLayout.normalize(
            lockDirectory?.path(percentEncoded: false) ?? (resolvedRoot == "/" ? "/.coordination" : resolvedRoot + "/.coordination"))
        guard let lockPath else {
            throw CoordinationError(
                .invalidRequest, path: lockDirectory?.absoluteString,
                message: "the lock directory must be an absolute file URL")
        }
        state = try DomainState.shared(root: resolvedRoot, lockDirectory: lockPath, allowUnreliable: allowUnreliableLocks)
    }

    /// A domain covering the whole machine: root `/`, locks in `$XDG_RUNTIME_DIR/file-coordination`
    /// (else `/tmp/file-coordination-<uid>`: SystemLayer's `RuntimeDirectory`, the live lock's rule). Locks then hold
    /// on this host only.
    /// - Throws: as `init(root:lockDirectory:allowUnreliableLocks:)`.
    public static func machineWide() throws(CoordinationError) -> CoordinationDomain {
        try CoordinationDomain(root: URL(fileURLWithPath: "/"), lockDirectory: URL(fileURLWithPath: RuntimeDirectory.path("file-coordination")))
    }

    static func realPath(_ path: String) -> String? { try? SystemFileIO().resolvedPath(path) }
}

/// The process-wide state of one lock directory, shared by every `CoordinationDomain` value naming it.
final class DomainState: Sendable {
    let root: String
    let lockDirectory: String
    let lockSupport: LockSupport
    let leases: LeasePool
    let presenters: PresenterHub

    private static let all = Locked<[PathKey: DomainState]>([:])

    private init(root: String, lockDirectory: String, lockSupport: LockSupport) {
        self.root = root
        self.lockDirectory = lockDirectory
        self.lockSupport = lockSupport
        self.leases = LeasePool(lockFilePath: lockDirectory + "/locks")
        self.presenters = PresenterHub(lockDirectory: lockDirectory, root: root)
    }

    static func shared(root: String, lockDirectory: String, allowUnreliable: Bool) throws(CoordinationError) -> DomainState {
        if let existing = all.withLock({ $0[PathKey(lockDirectory)] }) {
            guard samePath(existing.root, root) else {
                throw CoordinationError(
                    .invalidRequest, path: lockDirectory,
                    message: "lock directory '\(lockDirectory)' already coordinates root '\(existing.root)', not '\(root)'; use one lock directory per root")
            }
            return existing
        }
        try makeDirectory(lockDirectory, naming: "lock directory")
        let support = try LockSupport.probe(path: lockDirectory)
        if !support.isReliable && !allowUnreliable {
            throw CoordinationError(
                .locksUnreliable, path: lockDirectory,
                message: "the lock directory '\(lockDirectory)' is on \(support.filesystem), where coordination locks do not hold: \(support.reason); put the lock directory on a local filesystem or NFSv4")
        }
        let state = DomainState(root: root, lockDirectory: lockDirectory, lockSupport: support)
        let lease = try state.leases.checkout()
        if case .failed(let code) = OFDLock.isLocked(fd: lease.fd, .exclusive, start: 0, length: 1) {
            state.leases.checkin(lease)
            throw CoordinationError(
                .locksUnreliable, path: lockDirectory,
                message: "the kernel refuses open-file-description locks on '\(lockDirectory)' (\(support.filesystem)); Linux 3.15 or later is required",
                errno: code)
        }
        state.leases.checkin(lease)
        return all.withLock { all in
            if let raced = all[PathKey(lockDirectory)] { return raced }
            all[PathKey(lockDirectory)] = state
            return state
        }
    }

    /// Creates a directory of the lock tree (and its parents) if missing.
    /// - Throws: `.lockDirectoryUnavailable`, saying which directory (`what`) could not be made.
    static func makeDirectory(_ path: String, naming what: String) throws(CoordinationError) {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw CoordinationError(
                .lockDirectoryUnavailable, path: path,
                message: "cannot create the \(what) '\(path)': \(error.localizedDescription)")
        }
    }

    /// Resolves an item URL to its canonical absolute path and its path relative to the root.
    /// - Throws: `.invalidRequest` for a non-file URL, `.outsideDomain` for an item outside the root.
    func locate(_ url: URL, resolvingSymlink: Bool) throws(CoordinationError) -> (absolute: String, relative: String) {
        guard url.isFileURL, var path = LockLayout.normalize(url.path(percentEncoded: false)) else {
            throw CoordinationError(
                .invalidRequest, path: url.absoluteString, message: "'\(url.absoluteString)' is not an absolute file URL")
        }
        if resolvingSymlink, let resolved = CoordinationDomain.realPath(path) { path = resolved }
        if let relative = LockLayout.relative(path, toRoot: root) { return (path, relative) }
        // Slow path: the parent may be reached through a symbolic link.
        let parent = (path as NSString).deletingLastPathComponent
        if let real = CoordinationDomain.realPath(parent) {
            let candidate = LockLayout.normalize(real + "/" + (path as NSString).lastPathComponent) ?? path
            if let relative = LockLayout.relative(candidate, toRoot: root) { return (candidate, relative) }
        }
        throw CoordinationError(
            .outsideDomain, path: path,
            message: "'\(path)' is outside the coordination root '\(root)'; open a CoordinationDomain whose root contains it")
    }
}
