import DataProtectionKeys
import DataProtectionFiles

/// The standard directories of a container, in the style of `FileManager.SearchPathDirectory`.
public enum ContainerDirectory: String, CaseIterable, Sendable, Codable {
    /// `Bundle/`: the app's read-only resources, sealed by `BundleSeal`.
    case bundle
    /// `Documents/`: user data; backed up.
    case documents
    /// `Documents/Inbox/`: files handed to the app; read and delete only.
    case inbox
    /// `Library/`: non-user data; backed up except Caches.
    case library
    /// `Library/Application Support/`: the app's support files; backed up.
    case applicationSupport
    /// `Library/Caches/`: re-creatable data; never backed up; purgeable.
    case caches
    /// `Library/Preferences/`: the preferences store only; backed up.
    case preferences
    /// `tmp/`: temporary files; never backed up; purgeable; may be cleared at launch.
    case temporary

    /// The path inside the container.
    public var relativePath: String {
        switch self {
        case .bundle: "Bundle"
        case .documents: "Documents"
        case .inbox: "Documents/Inbox"
        case .library: "Library"
        case .applicationSupport: "Library/Application Support"
        case .caches: "Library/Caches"
        case .preferences: "Library/Preferences"
        case .temporary: "tmp"
        }
    }

    /// Whether backup tools should copy it: Documents and Library except Caches; never tmp or the bundle (reinstalled, not restored).
    public var isBackedUp: Bool {
        switch self {
        case .documents, .inbox, .library, .applicationSupport, .preferences: true
        case .bundle, .caches, .temporary: false
        }
    }

    /// Whether `purge` may delete what it holds (tmp and Caches).
    public var isPurgeable: Bool { self == .caches || self == .temporary }

    /// What the container API lets callers do to files in it.
    public var writeRule: WriteRule {
        switch self {
        case .bundle: .readOnly
        case .inbox: .readAndDelete
        case .preferences: .preferencesStoreOnly
        default: .readWrite
        }
    }

    /// The directory whose relative path is `path`, if it is a standard one.
    public init?(relativePath path: String) {
        guard let d = Self.allCases.first(where: { $0.relativePath == path }) else { return nil }
        self = d
    }
}

/// What the container API allows on the files of a directory.
public enum WriteRule: String, Sendable {
    /// Create, modify, delete.
    case readWrite
    /// Read only (the sealed bundle).
    case readOnly
    /// Read and delete; move an item out (`moveOutOfInbox`) before editing it.
    case readAndDelete
    /// Only the `Preferences` store writes here; apps never write files directly.
    case preferencesStoreOnly
}

/// A container's default protection class per directory; new files inherit it unless the caller names a class.
public struct ContainerPolicy: Sendable, Equatable {
    /// Apple's default for app data.
    public static let appDefault: ProtectionClass = .completeUntilFirstUserAuthentication

    /// Explicit classes; a directory not listed inherits from its parent directory, then `appDefault`.
    public var defaultClasses: [ContainerDirectory: ProtectionClass]

    /// Every directory at `completeUntilFirstUserAuthentication`, Apple's default.
    public static let standard = ContainerPolicy(defaultClasses: [:])

    public init(defaultClasses: [ContainerDirectory: ProtectionClass]) {
        self.defaultClasses = defaultClasses
    }

    /// The class new files in `directory` get by default.
    public func defaultClass(for directory: ContainerDirectory) -> ProtectionClass {
        if let c = defaultClasses[directory] { return c }
        switch directory {
        case .inbox: return defaultClass(for: .documents)
        case .applicationSupport, .caches, .preferences: return defaultClass(for: .library)
        default: return Self.appDefault
        }
    }

    /// The policy file's text: one `<relative path>\t<class name>` line per explicit class.
    func encoded() -> String {
        var lines = ["dataprotection-container-policy v1"]
        for d in ContainerDirectory.allCases { if let c = defaultClasses[d] { lines.append("\(d.relativePath)\t\(c.name)") } }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Parses `encoded()`; nil when malformed.
    init?(encoded text: String) {
        var lines = text.split(separator: "\n").map(String.init)
        guard lines.first == "dataprotection-container-policy v1" else { return nil }
        lines.removeFirst()
        var classes: [ContainerDirectory: ProtectionClass] = [:]
        for line in lines {
            let f = line.split(separator: "\t").map(String.init)
            guard f.count == 2, let d = ContainerDirectory(relativePath: f[0]), let c = ProtectionClass(name: f[1]) else { return nil }
            classes[d] = c
        }
        self.init(defaultClasses: classes)
    }
}
