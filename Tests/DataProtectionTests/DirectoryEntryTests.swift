import SystemLayer
@_spi(Testing) import DataProtection  // the testing SPI: the file-system seam, test hooks
import Foundation
import XCTest
import PathSyntax

/// Directory listings read each name in place (`entryName`): under AddressSanitizer, copying the
/// whole `d_name` field of an entry near the end of the directory buffer was a heap-buffer-overflow.
final class DirectoryEntryTests: XCTestCase {
    func testEveryListingReturnsEveryNameExactly() throws {
        let dir = NSTemporaryDirectory() + "dp-entries-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Many entries with names of every length fill the buffer, so some end right at its edge.
        var names: [String] = []
        for i in 0..<600 {
            let name = "\(i)-" + String(repeating: i % 3 == 0 ? "é" : "n", count: i % 120)
            names.append(name)
            FileManager.default.createFile(atPath: "\(dir)/\(name)", contents: Data())
        }
        names.sort()
        XCTAssertEqual(try SystemFileIO().directoryNames(dir).sorted(), names)
        XCTAssertEqual(try Confinement(root: dir).entries(".").map(\.name), names)
        var walked: [String] = []
        try FileTree.walk(dir) { walked.append(lastComponent(of: $0)) }
        XCTAssertEqual(walked.sorted(), names)
    }
}
