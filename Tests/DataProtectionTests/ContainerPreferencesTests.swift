import Foundation
import DataProtection
// @testable: hands the raw class key to the container-hold child process, a door no build product may have.
@testable import DataProtectionKeys
import TestSupport
import XCTest

/// The preferences store: typed values, atomic protected saves, safe across threads and processes.
final class ContainerPreferencesTests: XCTestCase {
    func testTypedValuesPersistProtectedInLibraryPreferences() throws {
        let (c, keys, root) = try makeContainer(self, policy: ContainerPolicy(defaultClasses: [.preferences: .complete]))
        let p = try c.preferences()
        XCTAssertNil(try p.string(forKey: "theme"))
        try p.set("dark", forKey: "theme")
        try p.set(true, forKey: "sync")
        try p.set(42, forKey: "launches")
        try p.set(1.5, forKey: "zoom")
        try p.set([0, 1, 255], forKey: "token")
        try p.set(.array([.string("a"), .dictionary(["k": .bool(false)])]), forKey: "recent")
        XCTAssertEqual(try p.string(forKey: "theme"), "dark")
        XCTAssertEqual(try p.bool(forKey: "sync"), true)
        XCTAssertEqual(try p.integer(forKey: "launches"), 42)
        XCTAssertEqual(try p.double(forKey: "zoom"), 1.5)
        XCTAssertEqual(try p.double(forKey: "launches"), 42)
        XCTAssertNil(try p.integer(forKey: "theme"), "another kind reads as absent")
        try p.removeValue(forKey: "sync")
        XCTAssertNil(try p.bool(forKey: "sync"))
        // On disk: one protected file of the Preferences class, in Library/Preferences.
        XCTAssertEqual(try c.info("Library/Preferences/standard.prefs").protectionClass, .complete)
        XCTAssertFalse(try readBytes(root + "/Library/Preferences/standard.prefs").containsSubsequence(Array("dark".utf8)))
        c.close()
        let again = try Container(at: root, keys: keys)
        defer { again.close() }
        let q = try again.preferences()
        XCTAssertEqual(try q.data(forKey: "token"), [0, 1, 255])
        XCTAssertEqual(try q.value(forKey: "recent"), .array([.string("a"), .dictionary(["k": .bool(false)])]))
        XCTAssertEqual(try q.dictionaryRepresentation().keys.sorted(), ["launches", "recent", "theme", "token", "zoom"])
        XCTAssertEqual(try again.preferences(named: "com.example.other").dictionaryRepresentation(), [:])
        for bad in ["", ".hidden", "../x", "a/b", "with space"] {
            assertProtectionError([.invalidArgument], bad) { _ = try again.preferences(named: bad) }
        }
    }

    func testLockedClassFailsCleanlyAndKeepsTheLastSave() throws {
        let (c, keys, _) = try makeContainer(self, policy: ContainerPolicy(defaultClasses: [.preferences: .complete]))
        let p = try c.preferences()
        try p.set("before", forKey: "k")
        keys.lock()
        assertProtectionError([.locked]) { _ = try p.string(forKey: "k") }
        assertProtectionError([.locked]) { try p.set("during", forKey: "k") }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: c.path(for: .preferences)).filter { $0.contains(".tmp") }, [], "no temporary file left")
    }

    func testIncrementsFromThreadsAndProcessesAreNeverLost() throws {
        let dir = try temporaryDirectory(self)
        let classC = try ClassKey.generate(.completeUntilFirstUserAuthentication)
        let root = dir + "/app"
        let c = try Container.create(at: root, keys: InMemoryClassKeys([classC]))
        defer { c.close() }
        let keyHex = classC.secret!.secret.withUnsafeBytes { hexString(Array($0)) }
        let p = try c.preferences()
        let threads = 3, perThread = 15, processes = 2, perProcess = 15
        let exe = try builtProduct("container-hold")
        let children = (0..<processes).map { _ -> Process in
            let proc = Process()
            proc.executableURL = URL(fileURLWithPath: exe)
            proc.arguments = [root, "increment", "count", String(perProcess)]
            proc.standardInput = Pipe()
            return proc
        }
        for child in children {
            try child.run()
            try (child.standardInput as! Pipe).fileHandleForWriting.write(contentsOf: Data(keyHex.utf8))
        }
        let group = DispatchGroup()
        for _ in 0..<threads {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                for _ in 0..<perThread {
                    try? p.update { v in
                        if case .integer(let n)? = v["count"] { v["count"] = .integer(n + 1) } else { v["count"] = .integer(1) }
                    }
                }
            }
        }
        group.wait()
        for child in children {
            child.waitUntilExit()
            XCTAssertEqual(child.terminationStatus, 0)
        }
        XCTAssertEqual(try p.integer(forKey: "count"), threads * perThread + processes * perProcess)
    }
}

extension Array where Element == UInt8 {
    func containsSubsequence(_ needle: [UInt8]) -> Bool {
        guard needle.count <= count else { return false }
        return (0...(count - needle.count)).contains { Array(self[$0..<$0 + needle.count]) == needle }
    }
}
