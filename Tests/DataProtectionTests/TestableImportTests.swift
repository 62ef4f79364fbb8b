// Tests go through public or package API: an `@testable import` under Tests/ says on the line above why it needs internals.
import Foundation
import XCTest

final class TestableImportTests: XCTestCase {
    /// Every `@testable import` in a Swift file under Tests/ (fuzz harnesses linked in included) has a
    /// `// @testable: <reason>` line directly above it.
    func testEveryTestableImportSaysWhy() throws {
        let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        let enumerator = try XCTUnwrap(FileManager.default.enumerator(atPath: tests.path))
        var files = 0, imports = 0, unexplained: [String] = []
        while let relative = enumerator.nextObject() as? String {
            // Build directories (Tests/Support/.build after a build of that package) hold other packages' sources.
            if (relative as NSString).lastPathComponent.hasPrefix(".build") { enumerator.skipDescendants(); continue }
            guard relative.hasSuffix(".swift") else { continue }
            let text = try String(contentsOfFile: tests.path + "/" + relative, encoding: .utf8)
            files += 1
            imports += text.split(separator: "\n", omittingEmptySubsequences: false).filter(Self.isTestableImport).count
            unexplained += Self.unexplainedTestableImports(in: text).map { "Tests/\(relative):\($0)" }
        }
        print("@testable imports in Tests/: \(imports) in \(files) Swift files, \(unexplained.count) without a reason")
        XCTAssertGreaterThan(files, 50, "the scan found too few files under \(tests.path)")
        XCTAssertEqual(
            unexplained, [],
            "each @testable import needs `// @testable: <reason>` on the line above; prefer making what the test needs `package`")
    }

    /// The check can fail: an import without the comment, or with an empty reason, is reported by line.
    func testTheCheckFindsAnUnexplainedImport() {
        let text = "import XCTest\n@testable import A\n// @testable: needs B's parser\n@testable import B\n// @testable:\n@testable import C\n"
        XCTAssertEqual(Self.unexplainedTestableImports(in: text), [2, 6])
    }

    /// The 1-based lines of `text` that are an `@testable import` without a reason comment directly above.
    static func unexplainedTestableImports(in text: String) -> [Int] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        return lines.indices.filter { i in
            guard isTestableImport(lines[i]) else { return false }
            let above = i > 0 ? lines[i - 1].trimmingCharacters(in: .whitespaces) : ""
            let prefix = "// @testable:"
            return !(above.hasPrefix(prefix) && !above.dropFirst(prefix.count).trimmingCharacters(in: .whitespaces).isEmpty)
        }.map { $0 + 1 }
    }

    private static func isTestableImport(_ line: Substring) -> Bool {
        let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
        return words.count >= 2 && words[0] == "@testable" && words[1] == "import"
    }
}
