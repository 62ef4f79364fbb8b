import DataProtectionFoundation
import DataProtection
import XCTest

/// The one type table checked against Apple's published values.
///
/// Sources: identifiers and "conforms to" from UniformTypeIdentifiers' UTCoreTypes.h (2020, the `UTType…` constants'
/// comments; also https://developer.apple.com/documentation/uniformtypeidentifiers/uttype-swift.struct, e.g.
/// `utf8TabSeparatedText`: "The identifier for this type is public.utf8-tab-separated-values-text … conforms to
/// UTTypeDelimitedText"); extensions and MIME types from Apple's "Uniform Type Identifiers Reference: System-Declared
/// Uniform Type Identifiers" (Table 1), for the types that list tags.
final class UTTypeTableTests: XCTestCase {
    /// (constant, identifier, direct conformances, preferred extension, preferred MIME type), written from Apple's documents.
    static let apple: [(UTType, String, Set<String>, String?, String?)] = [
        (.item, "public.item", [], nil, nil),
        (.content, "public.content", [], nil, nil),
        (.data, "public.data", ["public.item"], nil, nil),
        (.text, "public.text", ["public.data", "public.content"], nil, nil),
        (.plainText, "public.plain-text", ["public.text"], "txt", "text/plain"),
        (.utf8PlainText, "public.utf8-plain-text", ["public.plain-text"], nil, nil),
        (.delimitedText, "public.delimited-values-text", ["public.text"], nil, nil),
        (.commaSeparatedText, "public.comma-separated-values-text", ["public.delimited-values-text"], "csv", "text/csv"),
        (.tabSeparatedText, "public.tab-separated-values-text", ["public.delimited-values-text"], "tsv", "text/tab-separated-values"),
        (.json, "public.json", ["public.text"], "json", "application/json"),
        (.xml, "public.xml", ["public.text"], "xml", "application/xml"),
        (.html, "public.html", ["public.text"], "html", "text/html"),
        (.sourceCode, "public.source-code", ["public.plain-text"], nil, nil),
        (.cHeader, "public.c-header", ["public.source-code"], "h", nil),
        (.image, "public.image", ["public.data", "public.content"], nil, nil),
        (.png, "public.png", ["public.image"], "png", "image/png"),
        (.jpeg, "public.jpeg", ["public.image"], "jpeg", "image/jpeg"),
        (.gif, "com.compuserve.gif", ["public.image"], "gif", "image/gif"),
        (.heic, "public.heic", ["public.heif-standard"], "heic", "image/heic"),
        (.svg, "public.svg-image", ["public.image"], "svg", "image/svg+xml"),
        (.pdf, "com.adobe.pdf", ["public.data", "public.composite-content"], "pdf", "application/pdf"),
        (.archive, "public.archive", [], nil, nil),
        (.zip, "public.zip-archive", ["com.pkware.zip-archive"], "zip", "application/zip"),
        (.gzip, "org.gnu.gnu-zip-archive", ["public.data", "public.archive"], "gz", "application/x-gzip"),
        (.audiovisualContent, "public.audiovisual-content", ["public.data", "public.content"], nil, nil),
        (.movie, "public.movie", ["public.audiovisual-content"], nil, nil),
        (.mpeg4Movie, "public.mpeg-4", ["public.movie"], "mp4", "video/mp4"),
        (.audio, "public.audio", ["public.audiovisual-content"], nil, nil),
        (.mp3, "public.mp3", ["public.audio"], "mp3", "audio/mpeg"),
        (.propertyList, "com.apple.property-list", ["public.data"], "plist", nil),
        (.database, "public.database", [], nil, nil),
    ]

    func testTableMatchesApplesPublishedIdentifiersConformancesAndTags() {
        for (type, id, parents, ext, mime) in Self.apple {
            XCTAssertEqual(type.identifier, id)
            XCTAssertEqual(UTType(id), type, "\(id) is in the table")
            XCTAssertEqual(Set(type.supertypes.map(\.identifier)), parents, id)
            XCTAssertEqual(type.preferredFilenameExtension, ext, id)
            XCTAssertEqual(type.preferredMIMEType, mime, id)
            if let ext { XCTAssertEqual(UTType(filenameExtension: ext.uppercased(), conformingTo: .item), type, "\(ext) names \(id)") }
            if let mime { XCTAssertEqual(UTType(mimeType: mime.uppercased() + "; charset=utf-8", conformingTo: .item), type, "\(mime) names \(id)") }
            for p in parents { XCTAssertNotNil(UTType(p), "\(id)'s parent \(p) is declared") }
        }
    }

    func testTSVIsTabSeparatedTextEverywhere() throws {
        XCTAssertEqual(UTType(filenameExtension: "tsv"), .tabSeparatedText)
        XCTAssertEqual(UTType(filenameExtension: "tsv")?.identifier, "public.tab-separated-values-text")
        // The container listing reads the same table.
        XCTAssertEqual(ContentTypes.shared.type(forPath: "Documents/table.TSV")?.identifier, "public.tab-separated-values-text")
        XCTAssertNotEqual(UTType(filenameExtension: "tsv"), .delimitedText, "tsv is not the abstract delimited type (the old table's mistake)")
    }

    func testConformanceIsTransitiveThroughTheDeclaredGraph() {
        XCTAssertTrue(UTType.utf8PlainText.conforms(to: .text))
        XCTAssertTrue(UTType.utf8PlainText.conforms(to: .item))
        XCTAssertTrue(UTType.tabSeparatedText.conforms(to: .text))
        XCTAssertTrue(UTType.json.conforms(to: .content))
        XCTAssertTrue(UTType.heic.conforms(to: .image))
        XCTAssertTrue(UTType.zip.conforms(to: .archive))
        XCTAssertTrue(UTType.zip.conforms(to: .data))
        XCTAssertTrue(UTType.mpeg4Movie.conforms(to: .audiovisualContent))
        XCTAssertTrue(UTType.pdf.conforms(to: .content))
        XCTAssertTrue(UTType.plainText.isSubtype(of: .text))
        XCTAssertTrue(UTType.text.isSupertype(of: .json))
        XCTAssertFalse(UTType.json.conforms(to: .plainText), "Apple: JSON conforms to text, not plain text")
        XCTAssertFalse(UTType.png.conforms(to: .text))
        XCTAssertFalse(UTType.text.conforms(to: .plainText))
        XCTAssertFalse(UTType.mpeg4Movie.conforms(to: .audio))
        XCTAssertFalse(UTType.text.isSubtype(of: .text))
    }

    func testUnknownNamesAndNonConformingLookupsGiveNil() {
        XCTAssertNil(UTType("com.example.unknown"))
        XCTAssertNil(UTType(filenameExtension: "no-such-ext"))
        XCTAssertNil(UTType(filenameExtension: "png", conformingTo: .text))
        XCTAssertNil(UTType(mimeType: "application/x-unknown"))
        XCTAssertNil(UTType(filenameExtension: "sqlite"), "Apple publishes no SQLite type")
        XCTAssertEqual(UTType(filenameExtension: "JPG"), .jpeg)
        XCTAssertEqual(UTType.jpeg.tags[.filenameExtension], ["jpeg", "jpg"])
    }
}
