import DataProtectionKeys
import DataProtectionFiles
import SystemLayer
import FileCoordination
import ProtectionCrypto

#if canImport(Glibc)
import Glibc
#endif
internal import PathSyntax

/// An app's sandbox container: the standard directories, each with its policy, on top of protected files.
///
/// Every operation takes a path relative to the container root (or an
/// absolute path inside it) and resolves it beneath the root with `openat2`
/// (see `Confinement`), so nothing outside the container is reachable. While open, the container is held in use
/// (`InUseLock`), so `purge` leaves it alone. New files get their directory's
/// default class (`ContainerPolicy`) unless the caller names one.
public final class Container: Sendable {
    /// The name of the per-container policy file at the root.
    static let policyFileName = ".container-policy"

    /// The container root, absolute.
    public let root: String
    /// The default classes of this container's directories.
    public let policy: ContainerPolicy
    /// The protected-file layer confined to this container: paths are relative to `root`.
    ///
    /// It does not coordinate; the container's own `write`, `read`, `removeItem`
    /// and `moveItem` do, with `coordinator`'s domain.
    public let files: ProtectedFiles
    /// The signer the bundle was verified against at open (`OpenOptions.trustedBundleKey`); bundle resources are checked against it too.
    public let trustedBundleKey: Ed25519PublicKey?
    let confinement: Confinement
    let inUse: InUseLock
    let directories: [FileIdentity: ContainerDirectory]
    /// Coordinates whole-file reads, writes, moves and deletes with other processes.
    let coordinator: FileCoordinator

    /// How to open a container.
    public struct OpenOptions: Sendable {
        /// Cipher and chunk size for new files.
        public var fileOptions: ProtectedFileOptions
        /// Opening for launch: the bundle seal is verified against this key first.
        public var trustedBundleKey: Ed25519PublicKey?
        /// Empty `tmp/` at open when no other process holds the container.
        public var clearsTemporaryDirectory: Bool
        /// Which file coordination whole-file operations take part in.
        public var coordination: ContainerCoordination
        /// The I/O seam under the confinement: the real system calls, or a test's faults (package-level).
        package var io: any FileIO = SystemFileIO()

        public init(
            fileOptions: ProtectedFileOptions = .init(), trustedBundleKey: Ed25519PublicKey? = nil,
            clearsTemporaryDirectory: Bool = false, coordination: ContainerCoordination = .machineWide
        ) {
            self.fileOptions = fileOptions
            self.coordination = coordination
            self.trustedBundleKey = trustedBundleKey
            self.clearsTemporaryDirectory = clearsTemporaryDirectory
        }

        /// Opening for launch: verify the sealed bundle with `key` and clear `tmp/`.
        public static func launch(trusting key: Ed25519PublicKey) -> OpenOptions {
            OpenOptions(trustedBundleKey: key, clearsTemporaryDirectory: true)
        }
    }

    /// Creates the standard layout at `root` (made if missing) and opens it.
    /// - Parameters:
    ///   - root: the container directory; an existing container there is kept (its policy too).
    ///   - keys: the domain's keys (`domain.keys`) or an `InMemoryClassKeys`; their lock revokes every handle the
    ///     container opens.
    ///   - policy: the default classes, persisted in the container.
    ///   - options: how to open it.
    /// - Throws: `.io` when a directory cannot be made; what `init(at:keys:options:)` throws.
    public static func create(at root: String, keys: ClassKeys, policy: ContainerPolicy = .standard, options: OpenOptions = .init()) throws(ProtectionError) -> Container {
        do throws(SystemError) { try options.io.makeDirectory(atPath: root, mode: 0o700) } catch {
            if error.errno != EEXIST { throw .errno(error.errno, "create the container", root) }
        }
        let c: Confinement
        do throws(SystemError) { c = try Confinement(root: root, io: options.io) } catch { throw .errno(error.errno, "open the container", root) }
        var step = ""
        do throws(SystemError) {
            for d in ContainerDirectory.allCases {
                step = d.relativePath
                try c.makeDirectory(d.relativePath)
            }
            for d in ContainerDirectory.allCases where d.isPurgeable {
                step = d.relativePath + "/" + BackupPolicy.cacheDirectoryTagName
                if (try? c.status(step)) == nil { try c.writeFileAtomically(step, Array(BackupPolicy.cacheDirectoryTag.utf8), mode: 0o644) }
            }
            step = policyFileName
            if (try? c.status(step)) == nil { try c.writeFileAtomically(step, Array(policy.encoded().utf8)) }
        } catch { throw c.failure(error.errno, "create", step) }
        return try Container(at: root, keys: keys, options: options)
    }

    /// Opens the container at `root` and holds it in use until `close()` (or deinit).
    /// - Throws: `.notFound` when a standard directory is missing; `.bundleTampered` when
    ///   `options.trustedBundleKey` is set and the bundle does not match its seal.
    public init(at root: String, keys: ClassKeys, options: OpenOptions = .init()) throws(ProtectionError) {
        let absolute = isAbsolutePath(root) ? root : Self.currentDirectory() + "/" + root
        let c: Confinement
        do throws(SystemError) { c = try Confinement(root: absolute, io: options.io) } catch { throw .errno(error.errno, "open the container", absolute) }
        var ids: [FileIdentity: ContainerDirectory] = [:]
        for d in ContainerDirectory.allCases {
            do throws(SystemError) {
                let fd = try c.open(d.relativePath, flags: Confinement.pathOnly | O_DIRECTORY)
                defer { c.io.close(fd) }
                ids[FileIdentity(try c.io.fullStatus(fd))] = d
            } catch {
                throw ProtectionError(error.errno == ENOENT ? .notFound : .io(error.errno), "unable to open the container '\(absolute)': its '\(d.relativePath)' directory is missing or unusable; create the container with `Container.create(at:keys:)`", path: absolute)
            }
        }
        let text: [UInt8]
        do throws(SystemError) { text = try c.readFile(Self.policyFileName, limit: 64 << 10) } catch { throw c.failure(error.errno, "read the policy of", Self.policyFileName) }
        guard let policy = ContainerPolicy(encoded: String(decoding: text, as: UTF8.self)) else {
            throw ProtectionError(.invalidArgument, "unable to open the container '\(absolute)': its '\(Self.policyFileName)' is malformed; restore it from a backup", path: absolute)
        }
        if let key = options.trustedBundleKey { _ = try BundleSeal.verify(c, trusting: key) }
        self.root = absolute
        self.confinement = c
        self.directories = ids
        self.policy = policy
        self.trustedBundleKey = options.trustedBundleKey
        self.coordinator = try options.coordination.coordinator(root: absolute)
        self.inUse = try InUseLock.shared(c, exclusiveFirst: options.clearsTemporaryDirectory ? { () throws(ProtectionError) in try Purge.clear(.temporary, in: c) } : nil)
        self.files = ProtectedFiles(keys: keys, options: options.fileOptions, io: ConfinedFileIO(confinement: c, base: options.io),
            sealsPerKeyNonce: AEADNonceMode.maxSealsPerKeyNonce)
    }

    /// Stops holding the container in use; the object must not be used afterwards.
    public func close() { inUse.release() }

    /// The absolute path of a standard directory (the analogue of `FileManager.url(for:in:)`).
    public func path(for directory: ContainerDirectory) -> String { root + "/" + directory.relativePath }

    /// The absolute path of `tmp/` (the analogue of `FileManager.temporaryDirectory`).
    public var temporaryDirectory: String { path(for: .temporary) }

    // MARK: Files

    /// Atomically replaces `path` with a protected file holding `bytes`.
    /// - Parameters:
    ///   - bytes: the plaintext.
    ///   - path: a path beneath the container's root (relative, or absolute under it).
    ///   - protection: the class; nil for the directory's default.
    /// - Throws: `.readOnly` in the bundle, Inbox or Preferences; `.escapesContainer`; what `ProtectedFiles.write` throws.
    public func write(_ bytes: [UInt8], to path: String, protection: ProtectionClass? = nil) throws(ProtectionError) {
        let c = try protectionForNewFile(path, protection, "write")
        try coordinated(path, .replacing, "write") { () throws(ProtectionError) in
            do throws(ProtectionError) { try files.write(bytes, to: path, protection: c, via: .containerWrite) } catch { throw confinement.failure(error, "write", path) }
        }
    }

    /// Reads the whole plaintext of the protected file at `path`.
    /// - Parameter path: a path beneath the container's root (relative, or absolute under it).
    /// - Returns: its plaintext, every chunk authenticated.
    /// - Throws: `.escapesContainer`; what `ProtectedFiles.read(_:)` throws.
    public func read(_ path: String) throws(ProtectionError) -> [UInt8] {
        try read(path, via: .containerRead)
    }

    /// `read(_:)` on behalf of the entry point `via`.
    func read(_ path: String, via: ProtectedDataEntryPoint) throws(ProtectionError) -> [UInt8] {
        try coordinated(path, .reading, "read") { () throws(ProtectionError) in
            do throws(ProtectionError) { return try files.read(path, via: via) } catch { throw confinement.failure(error, "read", path) }
        }
    }

    /// Creates a new protected file at `path` and opens it for writing.
    /// - Parameters:
    ///   - path: a path beneath the container's root (relative, or absolute under it); nothing may be there.
    ///   - protection: the class; nil for the directory's default.
    /// - Returns: a handle for reading and writing; `close()` it.
    /// - Throws: `.readOnly` in the bundle, Inbox or Preferences; `.escapesContainer`; what `ProtectedFiles.create(_:protection:)` throws.
    public func create(_ path: String, protection: ProtectionClass? = nil) throws(ProtectionError) -> ProtectedFileHandle {
        let c = try protectionForNewFile(path, protection, "create")
        do throws(ProtectionError) {
            return try files.create(path, protection: c, reportedAs: path, journaled: true, via: .containerCreate)
        } catch { throw confinement.failure(error, "create", path) }
    }

    /// Opens the protected file at `path`; writing is refused where the directory's rule forbids it.
    public func open(_ path: String, forWriting: Bool = false) throws(ProtectionError) -> ProtectedFileHandle {
        if forWriting { _ = try checkWritable(path, "open for writing") }
        do throws(ProtectionError) { return try files.open(path, forWriting: forWriting, via: .containerOpen) } catch { throw confinement.failure(error, "open", path) }
    }

    /// The header facts of the protected file at `path`, without any key.
    public func info(_ path: String) throws(ProtectionError) -> ProtectedFileInfo {
        do throws(ProtectionError) { return try files.info(path) } catch { throw confinement.failure(error, "inspect", path) }
    }

    /// The class a new file at `path` gets when the caller names none.
    public func defaultProtection(for path: String) throws(ProtectionError) -> ProtectionClass {
        try directory(containing: path, "inspect").map { policy.defaultClass(for: $0) } ?? ContainerPolicy.appDefault
    }

    // MARK: Directories and items

    /// Creates the directory `path` (and missing parents when `withIntermediateDirectories`).
    public func createDirectory(_ path: String, withIntermediateDirectories: Bool = false) throws(ProtectionError) {
        // Parents are taken from the path beneath the root, so the walk up ends at the root ("/" has itself as parent).
        let inside: String
        do throws(SystemError) { inside = try confinement.beneath(path) } catch { throw confinement.failure(error.errno, "create the directory", path) }
        if withIntermediateDirectories, case let parent = parentDirectory(of: inside), parent != ".", (try? confinement.status(parent)) == nil {
            try createDirectory(parent, withIntermediateDirectories: true)
        }
        _ = try checkWritable(path, "create the directory")
        do throws(SystemError) { try confinement.makeDirectory(path, existingOK: withIntermediateDirectories) } catch { throw confinement.failure(error.errno, "create the directory", path) }
    }

    /// Removes the item at `path` (a directory with everything in it); allowed in the Inbox, refused in the bundle and Preferences.
    public func removeItem(_ path: String) throws(ProtectionError) {
        _ = try checkWritable(path, "remove", deleting: true)
        let st: stat
        do throws(SystemError) { st = try confinement.status(path) } catch { throw confinement.failure(error.errno, "remove", path) }
        if directories[FileIdentity(st)] != nil {
            throw ProtectionError(.invalidArgument, "unable to remove '\(path)': it is a standard directory of the container; remove what is inside it instead", path: path)
        }
        try coordinated(path, .deleting, "remove") { () throws(ProtectionError) in
            do throws(SystemError) { try confinement.removeTree(path) } catch { throw confinement.failure(error.errno, "remove", path) }
        }
    }

    /// Moves the item at `source` to `destination` (which must not exist), both inside the container.
    public func moveItem(from source: String, to destination: String) throws(ProtectionError) {
        _ = try checkWritable(source, "move", deleting: true)
        _ = try checkWritable(destination, "move an item to")
        try coordinatedMove(source, destination) { () throws(ProtectionError) in
            do throws(SystemError) { try confinement.rename(source, to: destination, replacing: false) } catch { throw confinement.failure(error.errno, "move", source) }
        }
    }

    /// Moves an item out of `Documents/Inbox/` so it can be edited, to `destination` (default `Documents/<name>`).
    /// - Returns: the item's new path.
    /// - Throws: `.invalidArgument` when `path` is not in the Inbox; `.alreadyExists` when the destination exists.
    @discardableResult
    public func moveOutOfInbox(_ path: String, to destination: String? = nil) throws(ProtectionError) -> String {
        let source = path.utf8.contains(UInt8(ascii: "/")) ? path : ContainerDirectory.inbox.relativePath + "/" + path
        guard try directory(containing: source, "move") == .inbox else {
            throw ProtectionError(.invalidArgument, "unable to move '\(source)' out of the Inbox: it is not in Documents/Inbox", path: source)
        }
        let target = destination ?? ContainerDirectory.documents.relativePath + "/" + lastComponent(of: source)
        try moveItem(from: source, to: target)
        return target
    }

    /// The items in the directory `path`, sorted by name; dot-files are hidden unless asked for.
    public func contentsOfDirectory(_ path: String, includingHiddenFiles: Bool = false, types: ContentTypes = .shared) throws(ProtectionError) -> [ContainerItem] {
        let list: [(name: String, status: stat)]
        do throws(SystemError) { list = try confinement.entries(path) } catch { throw confinement.failure(error.errno, "list", path) }
        let base = (try? confinement.beneath(path)) ?? path  // listed without error, so inside the root
        return list.filter { includingHiddenFiles || !$0.name.hasPrefix(".") }.map { e in
            ContainerItem(name: e.name, path: base == "." ? e.name : base + "/" + e.name, status: e.status, types: types)
        }
    }

    // MARK: Policy checks

    /// The standard directory that holds the item at `path` (innermost), or nil at the container root.
    ///
    /// Decided by the identity of the item's resolved parent directory and its
    /// ancestors, not by the spelling of the path, so `..` or a symbolic link
    /// cannot make an Inbox file look like a Documents file.
    func directory(containing path: String, _ action: String) throws(ProtectionError) -> ContainerDirectory? {
        do throws(SystemError) {
            return try confinement.withParent(of: path) { (fd, _) throws(SystemError) -> ContainerDirectory? in
                for id in try confinement.ancestry(of: fd) { if let d = directories[id] { return d } }
                return nil
            }
        } catch { throw confinement.failure(error.errno, action, path) }
    }

    /// Refuses writes the directory's rule forbids; returns the directory.
    func checkWritable(_ path: String, _ action: String, deleting: Bool = false) throws(ProtectionError) -> ContainerDirectory {
        let d = try directory(containing: path, action)
        switch d?.writeRule {
        case nil:
            throw ProtectionError(.invalidArgument, "unable to \(action) '\(path)': the container root holds only the standard directories; use Documents, Library/Application Support, Library/Caches or tmp", path: path)
        case .readOnly?:
            throw ProtectionError(.readOnly, "unable to \(action) '\(path)': the bundle is read-only; write to Documents or Library/Application Support instead", path: path)
        case .readAndDelete? where !deleting:
            throw ProtectionError(.readOnly, "unable to \(action) '\(path)': the Inbox is read-and-delete only; move the item out first with moveOutOfInbox(_:)", path: path)
        case .preferencesStoreOnly?:
            throw ProtectionError(.readOnly, "unable to \(action) '\(path)': Library/Preferences is written only by the preferences store; use the container's preferences(named:)", path: path)
        default:
            return d!
        }
    }

    private func protectionForNewFile(_ path: String, _ explicit: ProtectionClass?, _ action: String) throws(ProtectionError) -> ProtectionClass {
        let d = try checkWritable(path, action)
        return explicit ?? policy.defaultClass(for: d)
    }

    static func currentDirectory() -> String {
        var buf = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        return buf.withUnsafeMutableBufferPointer { getcwd($0.baseAddress, $0.count) != nil ? String(cString: $0.baseAddress!) : "." }
    }
}

/// One entry of a container directory listing.
public struct ContainerItem: Sendable, Equatable {
    /// What kind of item it is (never followed: a symbolic link is listed as one).
    public enum Kind: Sendable, Equatable { case file, directory, symbolicLink, other }

    public let name: String
    /// The path relative to the container root.
    public let path: String
    public let kind: Kind
    /// Bytes on disk (ciphertext size for protected files).
    public let size: Int64
    /// Last modification, seconds since 1970.
    public let modified: Int64
    /// The content type by filename extension; nil for directories and unknown extensions.
    public let contentType: UniformType?

    init(name: String, path: String, status st: stat, types: ContentTypes) {
        self.name = name
        self.path = path
        switch st.st_mode & S_IFMT {
        case S_IFREG: kind = .file
        case S_IFDIR: kind = .directory
        case S_IFLNK: kind = .symbolicLink
        default: kind = .other
        }
        size = Int64(st.st_size)
        modified = Int64(st.st_mtim.tv_sec)
        contentType = kind == .file ? types.type(forPath: name) : nil
    }
}
