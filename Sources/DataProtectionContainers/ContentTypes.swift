import DataProtectionKeys
import DataProtectionFiles
import Locking
internal import PathSyntax

/// A uniform type identifier: a name, the types it conforms to, and its filename extensions (the analogue of `UTType`).
public struct UniformType: Sendable, Hashable, CustomStringConvertible {
    /// Reverse-DNS identifier, e.g. `public.plain-text`.
    public let identifier: String
    /// Identifiers of the types this one directly conforms to.
    public let conformsTo: [String]
    /// Filename extensions, lowercase, without the dot; the first is the preferred one.
    public let filenameExtensions: [String]
    /// MIME types, lowercase; the first is the preferred one.
    public let mimeTypes: [String]
    /// A short human description.
    public let localizedDescription: String

    public init(identifier: String, conformsTo: [String], filenameExtensions: [String] = [], mimeTypes: [String] = [], description: String = "") {
        self.identifier = identifier
        self.conformsTo = conformsTo
        self.filenameExtensions = filenameExtensions.map { $0.lowercased() }
        self.mimeTypes = mimeTypes.map { $0.lowercased() }
        self.localizedDescription = description
    }

    public var description: String { identifier }
}

/// A table of uniform types with look-up by extension and conformance, plus custom registrations.
public final class ContentTypes: Sendable {
    /// The process-wide table with the built-in types.
    public static let shared = ContentTypes()

    private struct Table {
        var byIdentifier: [String: UniformType] = [:]
        var byExtension: [String: String] = [:]
        var byMIMEType: [String: String] = [:]
        var builtIn: Set<String> = []
    }
    private let table: Locked<Table>

    /// A table holding the built-in types.
    public init() {
        var t = Table()
        for u in Self.builtIns {
            t.byIdentifier[u.identifier] = u
            for e in u.filenameExtensions where t.byExtension[e] == nil { t.byExtension[e] = u.identifier }
            for m in u.mimeTypes where t.byMIMEType[m] == nil { t.byMIMEType[m] = u.identifier }
            t.builtIn.insert(u.identifier)
        }
        table = Locked(t)
    }

    /// Adds a custom type; its extensions then resolve to it.
    /// - Throws: `.invalidArgument` for an empty identifier or an unknown parent type;
    ///   `.alreadyExists` when it would redefine a built-in type.
    public func register(_ type: UniformType) throws(ProtectionError) {
        let r: ProtectionError? = table.withLock { t in
            guard !type.identifier.isEmpty, type.identifier.contains("."), !type.identifier.contains(where: \.isWhitespace) else {
                return ProtectionError(.invalidArgument, "unable to register the type '\(type.identifier)': an identifier is a reverse-DNS name such as com.example.note")
            }
            if let missing = type.conformsTo.first(where: { t.byIdentifier[$0] == nil }) {
                return ProtectionError(.invalidArgument, "unable to register the type '\(type.identifier)': it conforms to '\(missing)', which is not registered; register that first")
            }
            if t.builtIn.contains(type.identifier) {
                return ProtectionError(.alreadyExists, "unable to register the type '\(type.identifier)': it is built in; choose your own identifier")
            }
            t.byIdentifier[type.identifier] = type
            for e in type.filenameExtensions { t.byExtension[e] = type.identifier }
            for m in type.mimeTypes { t.byMIMEType[m] = type.identifier }
            return nil
        }
        if let r { throw r }
    }

    /// The type with `identifier`, if registered.
    public func type(withIdentifier identifier: String) -> UniformType? { table.withLock { $0.byIdentifier[identifier] } }

    /// The type for a filename extension (case-insensitive, without the dot).
    public func type(forExtension ext: String) -> UniformType? {
        table.withLock { t in t.byExtension[ext.lowercased()].flatMap { t.byIdentifier[$0] } }
    }

    /// The type for a MIME type (case-insensitive, without parameters such as `; charset=`).
    public func type(forMIMEType mimeType: String) -> UniformType? {
        let bare = String(mimeType.prefix { $0 != ";" }.filter { !$0.isWhitespace }).lowercased()
        return table.withLock { t in t.byMIMEType[bare].flatMap { t.byIdentifier[$0] } }
    }

    /// The type of a file by its name's extension; nil without a known one.
    public func type(forPath path: String) -> UniformType? {
        let name = pathComponents(of: path).last ?? path
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return nil }
        return type(forExtension: String(name[name.index(after: dot)...]))
    }

    /// Whether `identifier` is `other` or conforms to it through any chain of parents.
    public func conforms(_ identifier: String, to other: String) -> Bool {
        table.withLock { t in
            var seen: Set<String> = []
            var queue = [identifier]
            while let id = queue.popLast() {
                if id == other { return true }
                guard seen.insert(id).inserted, let u = t.byIdentifier[id] else { continue }
                queue += u.conformsTo
            }
            return false
        }
    }

    /// The type of the file at `path` if it conforms to one of `declared` (the types an app says it opens); nil otherwise.
    public func type(forPath path: String, conformingToAnyOf declared: [String]) -> UniformType? {
        guard let t = type(forPath: path), declared.contains(where: { conforms(t.identifier, to: $0) }) else { return nil }
        return t
    }

    /// The built-in types: Apple's published identifiers, conformances, extensions and MIME types (the one table; checked
    /// by UTTypeTableTests against UTCoreTypes.h and Apple's "System-Declared Uniform Type Identifiers").
    ///
    /// Apple publishes no SQLite type (`public.database` has no tags), so `.sqlite` files have none here either.
    static let builtIns: [UniformType] = [
        UniformType(identifier: "public.item", conformsTo: [], description: "item"),
        UniformType(identifier: "public.content", conformsTo: [], description: "content"),
        UniformType(identifier: "public.composite-content", conformsTo: ["public.content"], description: "composite content"),
        UniformType(identifier: "public.data", conformsTo: ["public.item"], description: "data"),
        UniformType(identifier: "public.directory", conformsTo: ["public.item"], description: "directory"),
        UniformType(identifier: "public.folder", conformsTo: ["public.directory"], description: "folder"),
        UniformType(identifier: "public.text", conformsTo: ["public.data", "public.content"], description: "text"),
        UniformType(identifier: "public.plain-text", conformsTo: ["public.text"], filenameExtensions: ["txt", "text"], mimeTypes: ["text/plain"], description: "plain text"),
        UniformType(identifier: "public.utf8-plain-text", conformsTo: ["public.plain-text"], description: "UTF-8 plain text"),
        UniformType(identifier: "net.daringfireball.markdown", conformsTo: ["public.plain-text"], filenameExtensions: ["md", "markdown"], mimeTypes: ["text/markdown"], description: "Markdown"),
        UniformType(identifier: "public.log", conformsTo: ["public.plain-text"], filenameExtensions: ["log"], description: "log"),
        UniformType(identifier: "public.delimited-values-text", conformsTo: ["public.text"], description: "delimited text"),
        UniformType(identifier: "public.comma-separated-values-text", conformsTo: ["public.delimited-values-text"], filenameExtensions: ["csv"], mimeTypes: ["text/csv", "text/comma-separated-values"], description: "CSV"),
        UniformType(identifier: "public.tab-separated-values-text", conformsTo: ["public.delimited-values-text"], filenameExtensions: ["tsv"], mimeTypes: ["text/tab-separated-values"], description: "TSV"),
        UniformType(identifier: "public.json", conformsTo: ["public.text"], filenameExtensions: ["json"], mimeTypes: ["application/json"], description: "JSON"),
        UniformType(identifier: "public.xml", conformsTo: ["public.text"], filenameExtensions: ["xml"], mimeTypes: ["application/xml", "text/xml"], description: "XML"),
        UniformType(identifier: "public.html", conformsTo: ["public.text"], filenameExtensions: ["html", "htm"], mimeTypes: ["text/html"], description: "HTML"),
        UniformType(identifier: "public.source-code", conformsTo: ["public.plain-text"], description: "source code"),
        UniformType(identifier: "public.swift-source", conformsTo: ["public.source-code"], filenameExtensions: ["swift"], description: "Swift source"),
        UniformType(identifier: "public.c-source", conformsTo: ["public.source-code"], filenameExtensions: ["c"], description: "C source"),
        UniformType(identifier: "public.c-header", conformsTo: ["public.source-code"], filenameExtensions: ["h"], description: "C header"),
        UniformType(identifier: "public.script", conformsTo: ["public.source-code"], description: "script"),
        UniformType(identifier: "public.shell-script", conformsTo: ["public.script"], filenameExtensions: ["sh"], mimeTypes: ["application/x-sh"], description: "shell script"),
        UniformType(identifier: "public.image", conformsTo: ["public.data", "public.content"], description: "image"),
        UniformType(identifier: "public.png", conformsTo: ["public.image"], filenameExtensions: ["png"], mimeTypes: ["image/png"], description: "PNG image"),
        UniformType(identifier: "public.jpeg", conformsTo: ["public.image"], filenameExtensions: ["jpeg", "jpg"], mimeTypes: ["image/jpeg"], description: "JPEG image"),
        UniformType(identifier: "com.compuserve.gif", conformsTo: ["public.image"], filenameExtensions: ["gif"], mimeTypes: ["image/gif"], description: "GIF image"),
        UniformType(identifier: "public.heif-standard", conformsTo: ["public.image"], description: "HEIF-standard image"),
        UniformType(identifier: "public.heic", conformsTo: ["public.heif-standard"], filenameExtensions: ["heic"], mimeTypes: ["image/heic"], description: "HEIC image"),
        UniformType(identifier: "public.svg-image", conformsTo: ["public.image"], filenameExtensions: ["svg"], mimeTypes: ["image/svg+xml"], description: "SVG image"),
        UniformType(identifier: "public.audiovisual-content", conformsTo: ["public.data", "public.content"], description: "audiovisual content"),
        UniformType(identifier: "public.movie", conformsTo: ["public.audiovisual-content"], description: "movie"),
        UniformType(identifier: "public.mpeg-4", conformsTo: ["public.movie"], filenameExtensions: ["mp4"], mimeTypes: ["video/mp4"], description: "MPEG-4 movie"),
        UniformType(identifier: "public.audio", conformsTo: ["public.audiovisual-content"], description: "audio"),
        UniformType(identifier: "public.mp3", conformsTo: ["public.audio"], filenameExtensions: ["mp3"], mimeTypes: ["audio/mpeg"], description: "MP3 audio"),
        UniformType(identifier: "com.adobe.pdf", conformsTo: ["public.data", "public.composite-content"], filenameExtensions: ["pdf"], mimeTypes: ["application/pdf"], description: "PDF document"),
        UniformType(identifier: "public.archive", conformsTo: [], description: "archive"),
        UniformType(identifier: "com.pkware.zip-archive", conformsTo: ["public.data", "public.archive"], description: "PKZip archive"),
        UniformType(identifier: "public.zip-archive", conformsTo: ["com.pkware.zip-archive"], filenameExtensions: ["zip"], mimeTypes: ["application/zip"], description: "ZIP archive"),
        UniformType(identifier: "public.tar-archive", conformsTo: ["public.data", "public.archive"], filenameExtensions: ["tar"], mimeTypes: ["application/x-tar"], description: "tar archive"),
        UniformType(identifier: "org.gnu.gnu-zip-archive", conformsTo: ["public.data", "public.archive"], filenameExtensions: ["gz"], mimeTypes: ["application/x-gzip", "application/gzip"], description: "gzip archive"),
        UniformType(identifier: "com.apple.property-list", conformsTo: ["public.data"], filenameExtensions: ["plist"], description: "property list"),
        UniformType(identifier: "public.database", conformsTo: [], description: "database"),
    ]
}
