// Foundation's Data Protection names mapped onto containers: the one translation (class ⇄ `FileProtectionType` and
// `Data.WritingOptions`, `URL` ⇄ container path) that every Foundation-shaped call of this module goes through.
import DataProtectionKeys
import DataProtectionFiles
import DataProtectionContainers
import Foundation
internal import PathSyntax

extension ProtectionClass {
    /// The class Foundation's `FileProtectionType` names.
    public init(_ type: FileProtectionType) {
        switch type.rawValue {
        case FileProtectionType.complete.rawValue: self = .complete
        case FileProtectionType.completeUnlessOpen.rawValue: self = .completeUnlessOpen
        case FileProtectionType.none.rawValue: self = .none
        default: self = .completeUntilFirstUserAuthentication
        }
    }

    /// The class as Foundation's `FileProtectionType`.
    public var fileProtectionType: FileProtectionType {
        switch self {
        case .complete: .complete
        case .completeUnlessOpen: .completeUnlessOpen
        case .completeUntilFirstUserAuthentication: .completeUntilFirstUserAuthentication
        case .none: .none
        }
    }

    /// The class the protection options of `Data.WritingOptions` name; nil when they name none.
    ///
    /// The protection options are a 4-bit field (`0xF000_0000`), not independent bits, as on Apple platforms.
    public init?(writingOptions options: Data.WritingOptions) {
        switch options.rawValue & 0xF000_0000 {
        case Data.WritingOptions.completeFileProtection.rawValue: self = .complete
        case Data.WritingOptions.completeFileProtectionUnlessOpen.rawValue: self = .completeUnlessOpen
        case Data.WritingOptions.completeFileProtectionUntilFirstUserAuthentication.rawValue: self = .completeUntilFirstUserAuthentication
        case Data.WritingOptions.noFileProtection.rawValue: self = .none
        default: return nil
        }
    }
}

extension Container {
    /// The URL of a standard directory, as `FileManager.url(for:in:appropriateFor:create:)` gives it in an app's container.
    /// - Throws: `.invalidArgument` for a directory a container does not have.
    public func url(for directory: FileManager.SearchPathDirectory) throws(ProtectionError) -> URL {
        let d: ContainerDirectory
        switch directory {
        case .documentDirectory: d = .documents
        case .libraryDirectory: d = .library
        case .applicationSupportDirectory: d = .applicationSupport
        case .cachesDirectory: d = .caches
        case .itemReplacementDirectory: d = .temporary
        default:
            throw ProtectionError(.invalidArgument, "a container has no \(directory) directory; use .documentDirectory, .libraryDirectory, .applicationSupportDirectory or .cachesDirectory")
        }
        return URL(fileURLWithPath: path(for: d), isDirectory: true)
    }

    /// The URL of `tmp/` (the analogue of `FileManager.default.temporaryDirectory`).
    public var temporaryDirectoryURL: URL { URL(fileURLWithPath: temporaryDirectory, isDirectory: true) }

    /// The URL of the read-only bundle (the analogue of `Bundle.main.bundleURL`).
    public var bundleURL: URL { URL(fileURLWithPath: path(for: .bundle), isDirectory: true) }

    /// The path of `url` relative to the container root.
    /// - Throws: `.escapesContainer` when `url` is not a file URL inside the container.
    public func relativePath(of url: URL) throws(ProtectionError) -> String {
        guard url.isFileURL, let relative = PathSyntax.relativePath(of: url.standardizedFileURL.path, inside: root) else {
            throw ProtectionError(.escapesContainer, "'\(url.path)' is not inside the container '\(root)'; use a URL from url(for:)", path: url.path)
        }
        return relative
    }

    /// Writes `data` like `Data.write(to:options:)`, with the class its protection options name (the directory's
    /// default when they name none).
    ///
    /// Always atomic (`.atomic` or not: a reader never sees a torn file, which is stronger than Apple's in-place
    /// write). With `.withoutOverwriting` the file is created exclusively (`create(_:protection:)`, the entry point
    /// `containerCreate`) and fails `.alreadyExists` when anything is at `url`; a failed write then removes what it
    /// created, so no partial file is left.
    public func write(_ data: Data, to url: URL, options: Data.WritingOptions = []) throws(ProtectionError) {
        let path = try relativePath(of: url), protection = ProtectionClass(writingOptions: options)
        guard options.contains(.withoutOverwriting) else { return try write([UInt8](data), to: path, protection: protection) }
        let handle = try create(path, protection: protection)
        defer { handle.close() }
        do throws(ProtectionError) {
            try handle.write([UInt8](data), at: 0)
            try handle.sync()
        } catch {
            try? removeItem(path)
            throw error
        }
    }

    /// Reads the protected file at `url`, like `Data(contentsOf:)`.
    public func contents(of url: URL) throws(ProtectionError) -> Data {
        Data(try read(try relativePath(of: url)))
    }

    /// Writes `data` to a container-relative path, with the class of `protection` (Foundation's name).
    public func write(_ data: Data, to path: String, protection: FileProtectionType?) throws(ProtectionError) {
        try write([UInt8](data), to: path, protection: protection.map(ProtectionClass.init))
    }
}
