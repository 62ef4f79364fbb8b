import DataProtection
import Foundation
import XCTest

/// `dpctl --version` and the library's release constants say what the built code really writes.
final class VersionTests: DpctlTestCase {
    func testVersionNamesTheReleaseAndTheFormatsItWrites() throws {
        let r = try ok(["--version"])
        XCTAssertEqual(r.out, DataProtectionRelease.summary + "\n")
        XCTAssertNotNil(DataProtectionRelease.version.range(of: #"^\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?$"#, options: .regularExpression),
                        "a semantic version: \(DataProtectionRelease.version)")
        XCTAssertTrue(r.out.hasPrefix("\(DataProtectionRelease.version) (file format \(DataProtectionRelease.fileFormat),"), r.out)
    }

    /// The constants are read off what the code writes: a new file's version byte, the keybag's and the CHANGELOG's top entry.
    func testTheConstantsMatchWhatIsWritten() throws {
        try initDomain()
        try ok(["unlock", "--passphrase-file", passphraseFile])
        try ok(["put", "--class", "A", "\(dir)/f"], input: Data("x".utf8))
        XCTAssertEqual(try bytes("\(dir)/f")[8], DataProtectionRelease.fileFormat, "header byte 8 is the format version (FORMAT.md §3)")
        XCTAssertEqual(try bytes("\(home)/keybag")[8], DataProtectionRelease.unboundKeybagFormat, "keybag byte 8 is its version (FORMAT.md §12); init binds to the file by default")

        // The CHANGELOG's newest release heading is this version, so a release cannot ship without its entry.
        let changelog = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../CHANGELOG.md").standardized
        let text = try String(contentsOf: changelog, encoding: .utf8)
        let heading = try XCTUnwrap(text.split(separator: "\n").first { $0.hasPrefix("## ") }, "CHANGELOG.md has a release heading")
        XCTAssertTrue(heading.hasPrefix("## \(DataProtectionRelease.version)"), "CHANGELOG.md's newest entry is \(heading), the library says \(DataProtectionRelease.version)")
    }
}
