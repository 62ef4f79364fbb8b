// Intents and options: what a coordination asks for, shaped like NSFileAccessIntent and NSFileCoordinator's options.
import Foundation

/// Options of a coordinated read, as `NSFileCoordinator.ReadingOptions`.
public struct ReadingOptions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// Do not ask presenters to save their unsaved changes first.
    public static let withoutChanges = ReadingOptions(rawValue: 1 << 0)
    /// If the item is a symbolic link, coordinate (and hand the accessor) the file it points to.
    public static let resolvesSymbolicLink = ReadingOptions(rawValue: 1 << 1)
    /// Hand the accessor a snapshot copy taken under the read lock; the lock is released before the accessor runs.
    public static let forUploading = ReadingOptions(rawValue: 1 << 3)
}

/// Options of a coordinated write, as `NSFileCoordinator.WritingOptions`.
public struct WritingOptions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// The item will be deleted: presenters accommodate the deletion; everything inside it is excluded.
    public static let forDeleting = WritingOptions(rawValue: 1 << 0)
    /// The item will be moved: presenters save first; everything inside it is excluded.
    public static let forMoving = WritingOptions(rawValue: 1 << 1)
    /// The item is read, changed and written back: presenters save first.
    public static let forMerging = WritingOptions(rawValue: 1 << 2)
    /// The item is replaced as a whole (for example by rename): everything inside it is excluded.
    public static let forReplacing = WritingOptions(rawValue: 1 << 3)
    /// Only metadata that does not depend on the contents changes (permissions, timestamps, xattrs).
    public static let contentIndependentMetadataOnly = WritingOptions(rawValue: 1 << 4)
}

/// One item of a multi-item coordination, as `NSFileAccessIntent`.
public struct FileAccessIntent: Sendable, Hashable {
    enum Kind: Sendable, Hashable {
        case reading(ReadingOptions)
        case writing(WritingOptions)
    }

    /// The item as requested.
    public let url: URL
    let kind: Kind

    /// An intent to read the item at `url`.
    /// - Parameters:
    ///   - url: the item.
    ///   - options: reading options.
    public static func readingIntent(with url: URL, options: ReadingOptions = []) -> FileAccessIntent {
        FileAccessIntent(url: url, kind: .reading(options))
    }

    /// An intent to write the item at `url`.
    /// - Parameters:
    ///   - url: the item.
    ///   - options: writing options.
    public static func writingIntent(with url: URL, options: WritingOptions = []) -> FileAccessIntent {
        FileAccessIntent(url: url, kind: .writing(options))
    }

    /// Which locks the intent takes on its item.
    var access: ItemAccess {
        switch kind {
        case .reading: return .read
        case .writing(let options):
            return options.isDisjoint(with: [.forDeleting, .forMoving, .forReplacing]) ? .write : .writeSubtree
        }
    }
}

/// An intent resolved against its domain: canonical paths and the URL the accessor receives.
struct ResolvedItem: Sendable {
    let intent: FileAccessIntent
    let absolute: String
    let relative: String
    var accessorURL: URL

    var isRead: Bool { if case .reading = intent.kind { true } else { false } }
    var readingOptions: ReadingOptions { if case .reading(let o) = intent.kind { o } else { [] } }
    var writingOptions: WritingOptions { if case .writing(let o) = intent.kind { o } else { [] } }

    /// Whether presenters are asked to save before the access (reads, merging and moving writes).
    var asksPresentersToSave: Bool {
        switch intent.kind {
        case .reading(let options): !options.contains(.withoutChanges)
        case .writing(let options): !options.isDisjoint(with: [.forMerging, .forMoving])
        }
    }
}
