// `UTType`'s shape (UniformTypeIdentifiers does not exist on Linux) over the library's one type table,
// `ContentTypes.shared`: this type holds only an identifier, and every answer (conformance, extensions, MIME types)
// comes from that table, so a container listing, `dpctl ls` and ported iOS code name a file's type the same way.
import DataProtectionContainers

/// A uniform type identifier, shaped like `UniformTypeIdentifiers.UTType`.
///
/// Differs from Apple: an unknown extension or MIME type gives nil, not a dynamic (`dyn.…`) type.
public struct UTType: Sendable, Hashable, CustomStringConvertible {
    /// The reverse-DNS identifier, e.g. `public.plain-text`.
    public let identifier: String

    /// The type with `identifier`; nil when the table has none (built in, or added with `ContentTypes.register`).
    public init?(_ identifier: String) {
        guard ContentTypes.shared.type(withIdentifier: identifier) != nil else { return nil }
        self.identifier = identifier
    }

    /// The type for a filename extension (case-insensitive, without the dot), if it conforms to `supertype`.
    public init?(filenameExtension: String, conformingTo supertype: UTType = .data) {
        guard let t = ContentTypes.shared.type(forExtension: filenameExtension),
              ContentTypes.shared.conforms(t.identifier, to: supertype.identifier) else { return nil }
        identifier = t.identifier
    }

    /// The type for a MIME type (case-insensitive, parameters ignored), if it conforms to `supertype`.
    public init?(mimeType: String, conformingTo supertype: UTType = .data) {
        guard let t = ContentTypes.shared.type(forMIMEType: mimeType),
              ContentTypes.shared.conforms(t.identifier, to: supertype.identifier) else { return nil }
        identifier = t.identifier
    }

    /// A constant from the built-in table (its identifier is checked by UTTypeTableTests).
    private init(builtIn identifier: String) { self.identifier = identifier }

    private var entry: UniformType? { ContentTypes.shared.type(withIdentifier: identifier) }

    /// Whether this type is `type` or conforms to it through any chain of declared conformances.
    public func conforms(to type: UTType) -> Bool { ContentTypes.shared.conforms(identifier, to: type.identifier) }
    /// Whether this type conforms to `type` and is not it.
    public func isSubtype(of type: UTType) -> Bool { self != type && conforms(to: type) }
    /// Whether `type` conforms to this type and is not it.
    public func isSupertype(of type: UTType) -> Bool { type.isSubtype(of: self) }

    /// The types this one directly declares conformance to.
    public var supertypes: Set<UTType> { Set((entry?.conformsTo ?? []).map(UTType.init(builtIn:))) }
    /// The extension a new file of this type gets (without the dot); nil when the type has none.
    public var preferredFilenameExtension: String? { entry?.filenameExtensions.first }
    /// The MIME type to send this type as; nil when the type has none.
    public var preferredMIMEType: String? { entry?.mimeTypes.first }
    /// Every extension and MIME type of the type.
    public var tags: [UTTagClass: [String]] {
        var t: [UTTagClass: [String]] = [:]
        if let e = entry?.filenameExtensions, !e.isEmpty { t[.filenameExtension] = e }
        if let m = entry?.mimeTypes, !m.isEmpty { t[.mimeType] = m }
        return t
    }
    /// A short English description (not localized on Linux).
    public var localizedDescription: String? { entry?.localizedDescription }
    /// Whether the type is one of the table's built-in (Apple-declared) ones.
    public var isDeclared: Bool { entry != nil }
    /// Always false: this table mints no dynamic types.
    public var isDynamic: Bool { false }
    public var description: String { identifier }

    public static let item = UTType(builtIn: "public.item")
    public static let content = UTType(builtIn: "public.content")
    public static let compositeContent = UTType(builtIn: "public.composite-content")
    public static let data = UTType(builtIn: "public.data")
    public static let directory = UTType(builtIn: "public.directory")
    public static let folder = UTType(builtIn: "public.folder")
    public static let text = UTType(builtIn: "public.text")
    public static let plainText = UTType(builtIn: "public.plain-text")
    public static let utf8PlainText = UTType(builtIn: "public.utf8-plain-text")
    public static let delimitedText = UTType(builtIn: "public.delimited-values-text")
    public static let commaSeparatedText = UTType(builtIn: "public.comma-separated-values-text")
    public static let tabSeparatedText = UTType(builtIn: "public.tab-separated-values-text")
    public static let json = UTType(builtIn: "public.json")
    public static let xml = UTType(builtIn: "public.xml")
    public static let html = UTType(builtIn: "public.html")
    public static let log = UTType(builtIn: "public.log")
    public static let sourceCode = UTType(builtIn: "public.source-code")
    public static let swiftSource = UTType(builtIn: "public.swift-source")
    public static let cSource = UTType(builtIn: "public.c-source")
    public static let cHeader = UTType(builtIn: "public.c-header")
    public static let script = UTType(builtIn: "public.script")
    public static let shellScript = UTType(builtIn: "public.shell-script")
    public static let image = UTType(builtIn: "public.image")
    public static let png = UTType(builtIn: "public.png")
    public static let jpeg = UTType(builtIn: "public.jpeg")
    public static let gif = UTType(builtIn: "com.compuserve.gif")
    public static let heif = UTType(builtIn: "public.heif-standard")
    public static let heic = UTType(builtIn: "public.heic")
    public static let svg = UTType(builtIn: "public.svg-image")
    public static let audiovisualContent = UTType(builtIn: "public.audiovisual-content")
    public static let movie = UTType(builtIn: "public.movie")
    public static let mpeg4Movie = UTType(builtIn: "public.mpeg-4")
    public static let audio = UTType(builtIn: "public.audio")
    public static let mp3 = UTType(builtIn: "public.mp3")
    public static let pdf = UTType(builtIn: "com.adobe.pdf")
    public static let archive = UTType(builtIn: "public.archive")
    public static let zip = UTType(builtIn: "public.zip-archive")
    public static let gzip = UTType(builtIn: "org.gnu.gnu-zip-archive")
    public static let propertyList = UTType(builtIn: "com.apple.property-list")
    public static let database = UTType(builtIn: "public.database")
}

/// The kinds of tag a type carries, shaped like `UTTagClass`.
public struct UTTagClass: RawRepresentable, Sendable, Hashable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Filename extensions, such as `txt`.
    public static let filenameExtension = UTTagClass(rawValue: "public.filename-extension")
    /// MIME types, such as `text/plain`.
    public static let mimeType = UTTagClass(rawValue: "public.mime-type")
}
