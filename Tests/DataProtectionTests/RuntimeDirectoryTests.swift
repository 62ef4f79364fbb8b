import Foundation
import SystemLayer
import XCTest

/// One rule for the runtime directory of the live lock and the coordinator (SystemLayer's RuntimeDirectory).
final class RuntimeDirectoryTests: XCTestCase {
    func testXDGRuntimeDirWhenWritableElseAPerUserDirectoryInTmp() throws {
        let dir = NSTemporaryDirectory() + "runtime-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        XCTAssertEqual(RuntimeDirectory.path("dataprotection", xdgRuntimeDir: dir), dir + "/dataprotection")
        let fallback = "/tmp/dataprotection-\(getuid())"
        XCTAssertEqual(RuntimeDirectory.path("dataprotection", xdgRuntimeDir: nil), fallback, "unset")
        XCTAssertEqual(RuntimeDirectory.path("dataprotection", xdgRuntimeDir: ""), fallback, "empty")
        XCTAssertEqual(RuntimeDirectory.path("dataprotection", xdgRuntimeDir: dir + "/missing"), fallback, "not a directory there")
        XCTAssertEqual(RuntimeDirectory.path("file-coordination", xdgRuntimeDir: nil), "/tmp/file-coordination-\(getuid())")
    }
}
