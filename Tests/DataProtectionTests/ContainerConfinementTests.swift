import SystemLayer
import Foundation
import DataProtection
import Synchronization
import XCTest

/// Escape attempts against the container's confinement: every one must fail or stay inside.
final class ContainerConfinementTests: XCTestCase {
    static let secret = Array("outside secret: must never be read through the container".utf8)

    struct Fixture {
        let container: Container
        let root: String
        let outside: String
        let keys: InMemoryClassKeys
    }

    /// A container next to an `outside/` directory holding a protected secret, an ordinary file and a flagged file.
    func makeFixture() throws -> Fixture {
        let (c, keys, root) = try makeContainer(self)
        let outside = (root as NSString).deletingLastPathComponent + "/outside"
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try ProtectedFiles(keys: keys).write(Self.secret, to: outside + "/secret.txt", protection: .none)
        try writeBytes(Array("plain".utf8), outside + "/plain.txt")
        return Fixture(container: c, root: root, outside: outside, keys: keys)
    }

    /// (Re)creates the links inside the container that point out of it.
    func plantLinks(_ f: Fixture) throws {
        let fm = FileManager.default
        let links: [(String, String)] = [
            ("Documents/rel-out", "../../outside"),
            ("Documents/rel-file", "../../outside/secret.txt"),
            ("Documents/abs-out", f.outside),
            ("Documents/abs-file", f.outside + "/secret.txt"),
            ("Documents/dangling-out", f.outside + "/created-through-link.txt"),
            ("Documents/proc-root", "/proc/self/root" + f.outside),
            ("Documents/proc-cwd", "/proc/self/cwd"),
            ("Documents/chain-1", "chain-2"),
            ("Documents/chain-2", "rel-out"),
            ("Library/Caches/deep-out", "../../../outside"),
            // Names ending in a Unicode prepend mark (U+0600): as Characters, "\u{600}/" is one grapheme, so a search
            // for the Character "/" misses the separator after it. The kernel splits at the byte.
            ("Documents/pre\u{600}", f.outside),
            ("Documents/pre-rel\u{600}", "../../outside"),
        ]
        for (link, target) in links {
            try? fm.removeItem(atPath: f.root + "/" + link)
            try fm.createSymbolicLink(atPath: f.root + "/" + link, withDestinationPath: target)
        }
        let hard = f.root + "/Documents/hard-link"
        try? fm.removeItem(atPath: hard)
        XCTAssertEqual(link(f.outside + "/secret.txt", hard), 0, "hard link: \(String(cString: strerror(errno)))")
        if !fm.fileExists(atPath: f.root + "/Documents/victim.txt") { try f.container.write(Array("victim".utf8), to: "Documents/victim.txt") }
    }

    /// What the outside directory holds: names, sizes, contents and attributes.
    func snapshot(_ dir: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: dir).sorted().map { name in
            let p = dir + "/" + name
            let bytes = (try? readBytes(p)) ?? []
            let flag = (try? ExtendedAttributes.value(of: BackupPolicy.excludeAttribute, at: p)) ?? nil
            return "\(name) \(bytes.count) \(bytes.hashValue) \(flag ?? [])"
        }
    }

    /// The escape paths: `..` in every position, absolute paths, links out, magic links, NUL bytes, long names.
    func escapePaths(_ f: Fixture) -> [String] {
        var paths: [String] = []
        let dirs = ContainerDirectory.allCases.map(\.relativePath) + ["."]
        for d in dirs {
            let depth = d == "." ? 0 : d.split(separator: "/").count
            for extra in 1...2 {
                let ups = Array(repeating: "..", count: depth + extra).joined(separator: "/")
                paths.append("\(d)/\(ups)/outside/secret.txt")
                paths.append("\(d)/\(ups)/outside")
            }
            paths.append("\(d)/../" + (depth > 0 ? String(repeating: "x/../", count: 1) : "") + String(repeating: "../", count: depth) + "outside/secret.txt")
        }
        paths += [
            "../outside/secret.txt", "./../outside/secret.txt", "..", "../", "Documents/x/../../../outside/plain.txt",
            "Documents/Inbox/../../../outside/new.txt", "tmp/../../outside/new.txt",
            f.outside + "/secret.txt", f.outside, "/etc/passwd", "//etc/passwd", "/", f.root + "/Documents/victim.txt",
            "/proc/self/root" + f.outside + "/secret.txt", "/proc/self/cwd",
            "Documents/rel-out/secret.txt", "Documents/rel-out/new.txt", "Documents/rel-file", "Documents/abs-out/secret.txt",
            "Documents/abs-out/new.txt", "Documents/abs-file", "Documents/dangling-out", "Documents/proc-root/secret.txt",
            "Documents/proc-cwd", "Documents/chain-1/secret.txt", "Library/Caches/deep-out/secret.txt", "Library/Caches/deep-out/plain.txt",
            "Documents/hard-link",
            "Documents/pre\u{600}/secret.txt", "Documents/pre\u{600}/plain.txt", "Documents/pre\u{600}/new.txt",
            "Documents/pre-rel\u{600}/secret.txt", "Documents/pre-rel\u{600}/new.txt", "Documents/pre\u{600}/",
            "Documents/a\u{0}/../../../outside/secret.txt", "\u{0}", "Documents/\u{0}", "Documents/victim.txt\u{0}../../../outside/secret.txt",
            "Documents/" + String(repeating: "n", count: 300), "Documents/" + Array(repeating: "..", count: 2100).joined(separator: "/") + f.outside + "/secret.txt",
            String(repeating: "Documents/../", count: 400) + "../outside/secret.txt",
        ]
        return paths
    }

    typealias Operation = (name: String, run: @Sendable (Container, String) throws -> String?)

    /// Each operation returns what it observed (for reads and listings), so a leak can be recognised.
    static let operations: [Operation] = [
        ("read", { c, p in String(decoding: try c.read(p), as: UTF8.self) }),
        ("info", { c, p in "size \(try c.info(p).plaintextSize)" }),
        ("open", { c, p in let h = try c.open(p); defer { h.close() }; return String(decoding: try h.read(at: 0, count: 4096), as: UTF8.self) }),
        ("open for writing", { c, p in let h = try c.open(p, forWriting: true); h.close(); return nil }),
        ("write", { c, p in try c.write(Array("overwritten".utf8), to: p); return nil }),
        ("create", { c, p in try c.create(p).close(); return nil }),
        ("create directory", { c, p in try c.createDirectory(p); return nil }),
        ("remove", { c, p in try c.removeItem(p); return nil }),
        ("move from", { c, p in try c.moveItem(from: p, to: "Documents/moved-in"); try? c.removeItem("Documents/moved-in"); return nil }),
        ("move to", { c, p in try c.moveItem(from: "Documents/victim.txt", to: p); return nil }),
        ("list", { c, p in try c.contentsOfDirectory(p, includingHiddenFiles: true).map(\.name).joined(separator: ",") }),
        ("exclude from backup", { c, p in try c.setExcludedFromBackup(true, for: p); return nil }),
        ("files.write", { c, p in try c.files.write(Array("x".utf8), to: p, protection: .none); return nil }),
    ]

    func testEscapeAttemptsAllFail() throws {
        let f = try makeFixture()
        var before = try snapshot(f.outside)
        let secretText = String(decoding: Self.secret, as: UTF8.self)
        var attempts = 0, escapes: [String] = [], refusedAsEscape = 0
        for path in escapePaths(f) {
            for op in Self.operations {
                try plantLinks(f)
                attempts += 1
                var observed: String?
                do {
                    observed = try op.run(f.container, path)
                } catch let e as ProtectionError {
                    if e.code == .escapesContainer { refusedAsEscape += 1 }
                    XCTAssertFalse(e.message.isEmpty)
                }
                let leaked = observed.map { $0.contains(secretText) || $0.contains("plain.txt") || $0 == "size \(Self.secret.count)" || $0.contains("created-through-link") } ?? false
                let after = try snapshot(f.outside)
                if leaked || after != before {
                    escapes.append("\(op.name) '\(path.prefix(120))'")
                    // Put the outside back so later attempts are judged on their own.
                    try? FileManager.default.removeItem(atPath: f.outside)
                    try FileManager.default.createDirectory(atPath: f.outside, withIntermediateDirectories: true)
                    try ProtectedFiles(keys: f.keys).write(Self.secret, to: f.outside + "/secret.txt", protection: .none)
                    try writeBytes(Array("plain".utf8), f.outside + "/plain.txt")
                    before = try snapshot(f.outside)  // the rewritten secret has a new file key, so new bytes
                }
            }
        }
        print("confinement: \(attempts) escape attempts (\(escapePaths(f).count) paths x \(Self.operations.count) operations), \(refusedAsEscape) refused as .escapesContainer, \(escapes.count) escapes")
        XCTAssertEqual(escapes, [], "escapes")
        XCTAssertGreaterThan(refusedAsEscape, attempts / 3)
    }

    func testMagicLinksBeneathTheRootAreRefused() throws {
        let f = try makeFixture()
        let mountPoint = f.root + "/Documents/proc"
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: false)
        guard try runTool("/bin/mount", ["-t", "proc", "proc", mountPoint]).status == 0 else {
            throw XCTSkip("cannot mount proc inside the container here (needs root and mount rights); the absolute-link cases in testEscapeAttemptsAllFail still cover /proc")
        }
        addTeardownBlock { _ = try? runTool("/bin/umount", ["-l", mountPoint]) }
        // Magic links reached without leaving the root: /proc/self/{root,cwd,exe}, /proc/self/fd/N of an outside directory.
        let outsideFD = open(f.outside, O_RDONLY | O_DIRECTORY)
        defer { close(outsideFD) }
        let paths = [
            "Documents/proc/self/root" + f.outside + "/secret.txt", "Documents/proc/self/cwd", "Documents/proc/self/exe",
            "Documents/proc/\(getpid())/root" + f.outside + "/secret.txt", "Documents/proc/self/fd/\(outsideFD)/secret.txt",
            "Documents/proc/thread-self/root" + f.outside + "/plain.txt", "Documents/proc/self/fd/\(outsideFD)",
        ]
        let before = try snapshot(f.outside)
        var attempts = 0, escapes = 0
        for path in paths {
            for op in Self.operations {
                attempts += 1
                let observed = try? op.run(f.container, path)
                if let o = observed, o.contains(String(decoding: Self.secret, as: UTF8.self)) || o.contains("plain.txt") || o == "size \(Self.secret.count)" { escapes += 1 }
            }
            do {
                _ = try f.container.read(path)
                XCTFail("read through the magic link '\(path)'")
            } catch {
                XCTAssertEqual(error.code, .escapesContainer, error.message)
            }
        }
        if try snapshot(f.outside) != before { escapes += 1 }
        print("confinement magic links: \(attempts) attempts through /proc mounted inside the root, \(escapes) escapes")
        XCTAssertEqual(escapes, 0)
    }

    func testClearErrorsForTheCommonMistakes() throws {
        let f = try makeFixture()
        try plantLinks(f)
        let relativeFix = "pass a path relative to the container root"
        let cases: [(String, ProtectionError.Code, String)] = [
            ("../outside/secret.txt", .escapesContainer, "resolves outside the container '\(f.root)'"),
            (f.outside + "/secret.txt", .escapesContainer, "is outside the container '\(f.root)'; \(relativeFix)"),
            ("/etc/passwd", .escapesContainer, "is outside the container '\(f.root)'; \(relativeFix)"),
            (f.root + "-sibling/Documents/a.txt", .escapesContainer, "is outside the container '\(f.root)'; \(relativeFix)"),
            ("/proc/self/root" + f.root + "/Documents/victim.txt", .escapesContainer, "is outside the container '\(f.root)'"),
            ("Documents/abs-file", .escapesContainer, "resolves outside the container '\(f.root)'"),
            // Absolute paths inside the root that leave it below: through a link, through "..".
            (f.root + "/Documents/abs-file", .escapesContainer, "resolves outside the container '\(f.root)'"),
            (f.root + "/Documents/../../outside/secret.txt", .escapesContainer, "resolves outside the container '\(f.root)'"),
            ("Documents/hard-link", .escapesContainer, "hard link"),
            (f.root + "/Documents/hard-link", .escapesContainer, "hard link"),
            ("Documents/a\u{0}b", .invalidArgument, "NUL"),
            ("Documents/" + String(repeating: "n", count: 300), .invalidArgument, "longer than 255"),
        ]
        // The container's own read, and its file layer used directly (`container.files`): the same answer.
        let readers: [(String, (String) throws -> Void)] = [
            ("read", { p in _ = try f.container.read(p) }),
            ("files.open", { p in try f.container.files.open(p).close() }),
            ("files.read", { p in _ = try f.container.files.read(p) }),
        ]
        for (path, code, phrase) in cases {
            for (how, read) in readers {
                do {
                    try read(path)
                    XCTFail("\(how) '\(path.prefix(40))' succeeded")
                } catch let e as ProtectionError {
                    XCTAssertEqual(e.code, code, "\(how): \(e.message)")
                    XCTAssertTrue(e.message.contains(phrase), "\(how): \(e.message)")
                    XCTAssertNotNil(e.path)
                }
            }
        }
        // Links that stay inside still work.
        try f.container.write(Array("inside".utf8), to: "Documents/real.txt")
        try FileManager.default.createSymbolicLink(atPath: f.root + "/Documents/inside-link", withDestinationPath: "real.txt")
        XCTAssertEqual(try f.container.read("Documents/inside-link"), Array("inside".utf8))
        XCTAssertEqual(try f.container.read("Documents/Inbox/../real.txt"), Array("inside".utf8))
    }

    /// An absolute path that lies inside the root names the same item as its relative path, in every operation.
    func testAbsolutePathsInsideTheRootWorkLikeRelativeOnes() throws {
        let f = try makeFixture()
        let c = f.container
        func abs(_ p: String) -> String { f.root + "/" + p }
        let one = Array("one".utf8), two = Array("two".utf8)
        var checked = 0
        func same(_ a: [UInt8], _ b: [UInt8], _ what: String) { XCTAssertEqual(a, b, what); checked += 1 }

        try c.write(one, to: abs("Documents/a.txt"))
        same(try c.read("Documents/a.txt"), one, "write")
        same(try c.read(abs("Documents/a.txt")), one, "read")
        same(try c.read(f.root + "//Documents/./a.txt"), one, "read with // and ./")
        let h = try c.files.open(abs("Documents/a.txt"))  // the reported case: EXDEV before
        same(try h.read(at: 0, count: 10), one, "files.open")
        h.close()
        same(try c.files.read(abs("Documents/a.txt")), one, "files.read")
        try c.files.write(two, to: abs("Documents/b.txt"), protection: .complete)
        same(try c.read("Documents/b.txt"), two, "files.write")
        XCTAssertEqual(try c.info(abs("Documents/b.txt")).protectionClass, .complete)
        let created = try c.create(abs("Library/Application Support/c.txt"))
        try created.write(one, at: 0)
        created.close()
        same(try c.read("Library/Application Support/c.txt"), one, "create")
        let writer = try c.open(abs("Documents/a.txt"), forWriting: true)
        try writer.append(two)
        writer.close()
        same(try c.read("Documents/a.txt"), one + two, "open for writing")

        try c.createDirectory(abs("Documents/dir/sub"), withIntermediateDirectories: true)
        XCTAssertTrue(FileManager.default.fileExists(atPath: abs("Documents/dir/sub")))
        XCTAssertTrue(try c.contentsOfDirectory(abs("Documents")).map(\.path).contains("Documents/a.txt"))
        XCTAssertTrue(try c.contentsOfDirectory(f.root).map(\.path).contains("Documents"))
        XCTAssertTrue(try c.contentsOfDirectory(f.root + "/").map(\.path).contains("Documents"))
        try c.moveItem(from: abs("Documents/b.txt"), to: abs("Documents/dir/b.txt"))
        same(try c.read("Documents/dir/b.txt"), two, "move")
        try c.setExcludedFromBackup(true, for: abs("Documents/dir"))
        XCTAssertTrue(try c.isExcludedFromBackup("Documents/dir"))
        try c.removeItem(abs("Documents/dir"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: abs("Documents/dir")))
        XCTAssertEqual(try c.defaultProtection(for: abs("Library/Caches/x")), try c.defaultProtection(for: "Library/Caches/x"))
        // The root itself is not an item to write or remove.
        assertProtectionError([.invalidArgument]) { try c.write(one, to: f.root) }
        assertProtectionError([.invalidArgument]) { try c.removeItem(f.root + "/") }
        print("confinement: \(checked) reads through absolute paths inside the root matched their relative paths")
    }

    func testSymlinkSwappedInDuringALoopOfOpensNeverEscapes() throws {
        let f = try makeFixture()
        let fm = FileManager.default
        try f.container.createDirectory("Documents/swap")
        try f.container.write(Array("inside".utf8), to: "Documents/swap/secret.txt")
        let swap = f.root + "/Documents/swap", parked = f.root + "/Documents/swap-parked"
        let stop = Atomic<Bool>(false)
        let swaps = Atomic<Int>(0)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            // Flip Documents/swap between the real directory and a symbolic link to the outside.
            while !stop.load(ordering: .relaxed) {
                rename(swap, parked)
                symlink(f.outside, swap)
                unlink(swap)
                rename(parked, swap)
                swaps.add(1, ordering: .relaxed)
            }
            done.signal()
        }
        var attempts = 0, insideReads = 0, escapes = 0
        let before = try snapshot(f.outside)
        for i in 0..<4000 {
            attempts += 1
            do {
                if i % 4 == 3 {
                    try f.container.write(Array("w".utf8), to: "Documents/swap/written-\(i % 8).txt")
                } else {
                    let bytes = try f.container.read("Documents/swap/secret.txt")
                    if bytes == Self.secret { escapes += 1 } else if bytes == Array("inside".utf8) { insideReads += 1 }
                }
            } catch {}  // refusals (typed ProtectionError) are expected
        }
        stop.store(true, ordering: .relaxed)
        done.wait()
        if try snapshot(f.outside) != before { escapes += 1 }
        XCTAssertFalse(fm.fileExists(atPath: f.outside + "/written-3.txt"))
        print("confinement race: \(attempts) opens while the link flipped \(swaps.load(ordering: .relaxed)) times; \(insideReads) reads inside, \(escapes) escapes")
        XCTAssertEqual(escapes, 0)
        XCTAssertGreaterThan(swaps.load(ordering: .relaxed), 0)
    }
}
