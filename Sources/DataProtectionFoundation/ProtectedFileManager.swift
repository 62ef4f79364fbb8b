// `FileManager`-shaped calls on the app context: the attribute and whole-file calls iOS code makes on
// `FileManager.default`, on protected files in the app container.
import DataProtection
import Foundation

/// The calls of `FileManager` that touch Data Protection, on the app container (iOS: `FileManager.default`).
///
/// Paths are absolute paths inside the container (as iOS code builds them from `url(for:in:appropriateFor:create:)`)
/// or relative to its root. Each call is a thin forward to the container: `createFile` to `Container.write` (entry
/// point `containerWrite`), `contents(atPath:)` to `Container.read` (`containerRead`), `setAttributes` to
/// `Container.setProtection` (`filesRewrap`, or `filesProtect` for a plain file). Foundation's own
/// `FileManager.default.createFile(…, attributes: [.protectionKey: …])` on Linux writes plaintext: port such calls to
/// `ProtectedFileManager.default` (a port may add `typealias FileManager = ProtectedFileManager` to a file).
public struct ProtectedFileManager: Sendable {
    /// Foundation's names, so `FileManager.SearchPathDirectory` and the like read the same after a `typealias`.
    public typealias SearchPathDirectory = FileManager.SearchPathDirectory
    public typealias SearchPathDomainMask = FileManager.SearchPathDomainMask

    let explicit: AppContext?

    /// The manager of the current app context (`AppContext.current`, resolved at each call).
    public static var `default`: ProtectedFileManager { ProtectedFileManager() }

    /// A manager of `context`, or of the current one when nil.
    public init(context: AppContext? = nil) { explicit = context }

    func context(_ path: String?, writing: Bool) throws(CocoaError) -> AppContext {
        if let explicit { return explicit }
        return try AppContext.resolve(for: path.map { URL(fileURLWithPath: $0) }, writing: writing)
    }

    private func run<R>(_ path: String, writing: Bool, _ body: (Container) throws(ProtectionError) -> R) throws(CocoaError) -> R {
        let c = try context(path, writing: writing).container
        do throws(ProtectionError) { return try body(c) } catch { throw CocoaError(error, writing: writing, url: URL(fileURLWithPath: path)) }
    }

    /// The URL of a container directory (iOS: `url(for:in:appropriateFor:create:)`); `.userDomainMask` only.
    ///
    /// `.documentDirectory`, `.libraryDirectory`, `.applicationSupportDirectory`, `.cachesDirectory`, and
    /// `.itemReplacementDirectory` (the container's `tmp/`). They always exist, so `create` changes nothing.
    /// - Throws: `.fileNoSuchFile` for a directory a container does not have (iOS: the same code).
    public func url(for directory: SearchPathDirectory, in domain: SearchPathDomainMask, appropriateFor url: URL?, create shouldCreate: Bool) throws(CocoaError) -> URL {
        let c = try context(nil, writing: false).container
        guard domain.contains(.userDomainMask) else {
            throw CocoaError(ProtectionError(.invalidArgument, "a container has only the user domain; pass .userDomainMask"), writing: false)
        }
        do throws(ProtectionError) { return try c.url(for: directory) } catch { throw CocoaError(.fileNoSuchFile, userInfo: [NSUnderlyingErrorKey: error, NSLocalizedDescriptionKey: error.message]) }
    }

    /// The URLs of a container directory (iOS: `urls(for:in:)`); empty for one a container does not have.
    public func urls(for directory: SearchPathDirectory, in domain: SearchPathDomainMask) -> [URL] {
        (try? url(for: directory, in: domain, appropriateFor: nil, create: false)).map { [$0] } ?? []
    }

    /// The container's `tmp/` (iOS: `FileManager.default.temporaryDirectory`).
    public var temporaryDirectory: URL {
        get throws(CocoaError) { try context(nil, writing: false).container.temporaryDirectoryURL }
    }

    /// Writes `data` to a protected file at `path`, replacing what is there (iOS: `createFile(atPath:contents:attributes:)`).
    /// - Parameter attributes: `.protectionKey: FileProtectionType` names the class (else the directory's default);
    ///   other keys are ignored.
    /// - Returns: false when the file could not be written (locked class, outside the container, …), as on iOS.
    @discardableResult
    public func createFile(atPath path: String, contents data: Data?, attributes: [FileAttributeKey: Any]? = nil) -> Bool {
        let protection = (attributes?[.protectionKey] as? FileProtectionType).map(ProtectionClass.init)
        return (try? run(path, writing: true) { (c) throws(ProtectionError) in
            try c.write([UInt8](data ?? Data()), to: path, protection: protection)
        }) != nil
    }

    /// The plaintext of the protected file at `path`, or nil when it cannot be read (iOS: `contents(atPath:)`).
    public func contents(atPath path: String) -> Data? {
        try? run(path, writing: false) { (c) throws(ProtectionError) in Data(try c.read(path)) }
    }

    /// Whether an item exists at `path` inside the container (iOS: `fileExists(atPath:)`).
    public func fileExists(atPath path: String) -> Bool { (try? item(atPath: path)) != nil }

    /// The item's attributes (iOS: `attributesOfItem(atPath:)`): `.type`, `.size` (plaintext bytes for a protected
    /// file), `.modificationDate`, and `.protectionKey` for a protected file (absent for a plain one, which no class
    /// protects).
    /// - Throws: `.fileReadNoSuchFile`, `.fileReadNoPermission` outside the container.
    public func attributesOfItem(atPath path: String) throws(CocoaError) -> [FileAttributeKey: Any] {
        let item = try item(atPath: path)
        var a: [FileAttributeKey: Any] = [.modificationDate: Date(timeIntervalSince1970: TimeInterval(item.modified)), .size: NSNumber(value: item.size)]
        switch item.kind {
        case .file:
            a[.type] = FileAttributeType.typeRegular
            if let info = try? run(path, writing: false, { (c) throws(ProtectionError) in try c.info(path) }) {
                a[.protectionKey] = info.protectionClass.fileProtectionType
                a[.size] = NSNumber(value: info.plaintextSize)
            }
        case .directory: a[.type] = FileAttributeType.typeDirectory
        case .symbolicLink: a[.type] = FileAttributeType.typeSymbolicLink
        case .other: a[.type] = FileAttributeType.typeUnknown
        }
        return a
    }

    /// Sets the item's attributes (iOS: `setAttributes(_:ofItemAtPath:)`); only `.protectionKey` is supported.
    ///
    /// The file's key is rewrapped to the new class (a plain file is protected in place); its contents are not
    /// re-encrypted.
    /// - Throws: `.fileWriteNoPermission` while the file's class is locked or in a read-only directory;
    ///   `.fileWriteUnknown` for an attribute this layer cannot set (rather than ignoring it silently).
    public func setAttributes(_ attributes: [FileAttributeKey: Any], ofItemAtPath path: String) throws(CocoaError) {
        for key in attributes.keys where key != .protectionKey {
            throw CocoaError(ProtectionError(.unsupportedFeature, "unable to set '\(key.rawValue)' of '\(path)': only .protectionKey is supported on protected files", path: path), writing: true, url: URL(fileURLWithPath: path))
        }
        guard let type = attributes[.protectionKey] as? FileProtectionType else { return }
        try run(path, writing: true) { (c) throws(ProtectionError) in _ = try c.setProtection(ProtectionClass(type), of: path) }
    }

    /// Removes the item at `path` (iOS: `removeItem(atPath:)`).
    public func removeItem(atPath path: String) throws(CocoaError) {
        try run(path, writing: true) { (c) throws(ProtectionError) in try c.removeItem(path) }
    }

    /// The listing entry of the item at `path`.
    func item(atPath path: String) throws(CocoaError) -> ContainerItem {
        try run(path, writing: false) { (c) throws(ProtectionError) -> ContainerItem in
            let relative = try c.relativePath(of: URL(fileURLWithPath: path, relativeTo: URL(fileURLWithPath: c.root, isDirectory: true)))
            let slash = relative.lastIndex(of: "/")
            let parent = slash.map { String(relative[..<$0]) } ?? "."
            let name = slash.map { String(relative[relative.index(after: $0)...]) } ?? relative
            guard let found = try c.contentsOfDirectory(parent, includingHiddenFiles: true).first(where: { $0.name == name }) else {
                throw ProtectionError(.notFound, "unable to find '\(path)' in the container '\(c.root)'", path: path)
            }
            return found
        }
    }
}
