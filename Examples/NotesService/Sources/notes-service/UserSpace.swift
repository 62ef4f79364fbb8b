// One user's protected space: their protection domain, run as a Service, and their container.
import DataProtection
import DataProtectionService
import Foundation
import Logging
import NIOPosix
import Synchronization

/// A user's domain (run by a `DataProtectionService`, which closes the container and wipes the keys at shutdown) and
/// the container that holds their notes and uploads.
///
/// Layout of the container (policy: Documents and Library/Caches `complete`):
/// - `Documents/notes/<name>`: the notes, `complete`, backed up;
/// - `Documents/Inbox/<name>`: uploads as delivered, `completeUnlessOpen`, so an upload is accepted while the domain
///   is locked (a new file's key is sealed to the class's public key; Apple's pattern for background downloads);
/// - `Documents/uploads/<name>`: uploads once the worker has processed them, `complete`;
/// - `Library/Caches/previews/<name>`: a re-creatable preview of each upload, `complete`, excluded from backup.
///
/// Every file call here is an async (`nonblocking`) form, or runs on `NIOThreadPool.singleton`, so no request
/// handler blocks a NIO event loop or Swift's cooperative pool.
final class UserSpace: Sendable {
    let name: String
    let domain: ProtectionDomain
    let service: DataProtectionService
    let container: Container
    /// Upload names whose delivery is running: a second upload of the same name is refused until it is in the Inbox.
    private let delivering = Mutex<Set<String>>([])

    static let notes = "Documents/notes"
    static let inbox = ContainerDirectory.inbox.relativePath
    static let uploads = "Documents/uploads"
    static let previews = "Library/Caches/previews"
    /// Documents (and with it the Inbox) and Caches hold `complete` files unless a call names another class.
    static let policy = ContainerPolicy(defaultClasses: [.documents: .complete, .caches: .complete])
    /// How many bytes of an upload its preview keeps.
    static let previewLength = 256

    /// Opens `STATE/users/<name>`: its domain (made by `dpctl init`) and its container (made here at the first start).
    /// - Throws: `ProtectionError` when the domain or the container cannot be opened.
    static func open(_ name: String, state: String, keyStore: KeyStore, logger: Logger) throws -> UserSpace {
        let location = DomainLocation(home: "\(state)/users/\(name)/domain", deviceDirectory: "\(state)/devices")
        let domain = try ProtectionDomain.open(at: location, keyStore: keyStore, logger: logger)
        let service = DataProtectionService(domain: domain, logger: logger)
        let root = "\(state)/users/\(name)/container"
        try Container.create(at: root, keys: domain.keys, policy: policy).close()  // keeps an existing one as it is
        let container = try service.openContainer(at: root)
        for d in [notes, uploads, previews] { try container.createDirectory(d, withIntermediateDirectories: true) }
        return UserSpace(name: name, domain: domain, service: service, container: container)
    }

    private init(name: String, domain: ProtectionDomain, service: DataProtectionService, container: Container) {
        self.name = name
        self.domain = domain
        self.service = service
        self.container = container
    }

    /// Whether the user's `complete` data is unavailable right now.
    var isLocked: Bool { domain.liveLock.isLocked(.complete) }

    // MARK: Notes

    func writeNote(_ note: String, _ bytes: [UInt8]) async throws {
        try await container.nonblocking.write(bytes, to: "\(Self.notes)/\(note)")
    }

    func readNote(_ note: String) async throws -> [UInt8] {
        try await container.nonblocking.read("\(Self.notes)/\(note)")
    }

    func deleteNote(_ note: String) async throws {
        let c = container
        try await offPool { try c.removeItem("\(Self.notes)/\(note)") }
    }

    func noteNames() async throws -> [String] {
        try await names(in: Self.notes)
    }

    // MARK: Uploads

    /// What became of an upload.
    enum UploadState { case processed, pending, absent }

    /// Delivers an upload into the Inbox as a whole-file atomic replace: it is there entire or not at all.
    /// - Throws: `ProtectionError(.alreadyExists)` when an upload of that name is pending or processed.
    func deliverUpload(_ upload: String, _ bytes: [UInt8]) async throws {
        let claimed = delivering.withLock { $0.insert(upload).inserted }
        guard claimed, try await uploadState(upload) == .absent else {
            if claimed { _ = delivering.withLock { $0.remove(upload) } }
            throw ProtectionError(.alreadyExists, "unable to accept the upload '\(upload)': an upload of that name exists; choose another name")
        }
        defer { _ = delivering.withLock { $0.remove(upload) } }
        // Delivered beside the container API (which keeps the Inbox read-and-delete), as another app hands a file in.
        try await container.files.nonblocking.write(bytes, to: "\(Self.inbox)/\(upload)", protection: .completeUnlessOpen)
    }

    func uploadState(_ upload: String) async throws -> UploadState {
        let c = container
        return try await offPool {
            if c.exists("\(Self.uploads)/\(upload)") { return .processed }
            return c.exists("\(Self.inbox)/\(upload)") ? .pending : .absent
        }
    }

    func readUpload(_ upload: String) async throws -> [UInt8] {
        try await container.nonblocking.read("\(Self.uploads)/\(upload)")
    }

    func pendingUploads() async throws -> [String] {
        try await names(in: Self.inbox)
    }

    /// Moves one upload from the Inbox into Documents/uploads and writes its preview; then removes the Inbox item.
    ///
    /// Every step is an atomic replace or a removal, and the Inbox item goes last, so an interruption at any point
    /// leaves it to be processed again at the next start (which writes the same bytes): nothing is lost or torn.
    /// - Throws: `.locked` while the domain is locked (the caller waits for unlock); `.notFound` when it is gone.
    func processUpload(_ upload: String) async throws {
        let bytes = try await container.nonblocking.read("\(Self.inbox)/\(upload)")
        try await container.nonblocking.write(bytes, to: "\(Self.uploads)/\(upload)")
        try await container.nonblocking.write(Array(bytes.prefix(Self.previewLength)), to: "\(Self.previews)/\(upload)")
        let c = container
        try await offPool { try c.removeItem("\(Self.inbox)/\(upload)") }
    }

    // MARK: Helpers

    /// The regular files in `directory`, by name (no hidden files: an atomic replace's temporary ones are hidden).
    private func names(in directory: String) async throws -> [String] {
        let c = container
        return try await offPool { try c.contentsOfDirectory(directory).filter { $0.kind == .file }.map(\.name) }
    }
}

extension Container {
    /// Whether a protected file is at `path` (its header reads without a key).
    fileprivate func exists(_ path: String) -> Bool { (try? info(path)) != nil }
}

/// Runs a container call that has no async form on NIO's blocking thread pool, off the event loops and the
/// cooperative pool.
func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await NIOThreadPool.singleton.runIfActive(body)
}
