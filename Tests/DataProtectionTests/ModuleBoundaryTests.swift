// Only the system layer talks to Linux: no shipped module but SystemLayer imports the C shims, and the files moved
// onto the system layer make no raw file, socket or lock system call of their own.
import Foundation
import XCTest

final class ModuleBoundaryTests: XCTestCase {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// No module that ships (a product's target, or one a product depends on) other than SystemLayer lists `CShims`
    /// among its dependencies in Package.swift or imports it in a Swift file.
    func testOnlyTheSystemLayerImportsTheCShims() throws {
        let manifest = try PackageManifest(contentsOf: Self.packageRoot.appendingPathComponent("Package.swift"))
        let shipped = manifest.shippedTargets()
        XCTAssertTrue(shipped.isSuperset(of: ["DataProtection", "FileCoordination", "SystemLayer", "dpctl"]), "Package.swift parsed wrongly: \(shipped.sorted())")
        var offenders: [String] = []
        var files = 0
        for name in shipped.sorted() where name != "SystemLayer" && name != "CShims" {
            let target = try XCTUnwrap(manifest.targets[name])
            if target.dependencies.contains("CShims") { offenders.append("Package.swift: target '\(name)' depends on CShims") }
            for file in try Self.swiftFiles(in: Self.packageRoot.appendingPathComponent(target.path)) {
                files += 1
                let text = try String(contentsOf: file, encoding: .utf8)
                for (i, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() where Self.importsCShims(line) {
                    offenders.append("\(file.path.dropFirst(Self.packageRoot.path.count + 1)):\(i + 1)")
                }
            }
        }
        print("module boundary: \(shipped.count) shipped modules, \(files) Swift files outside SystemLayer, \(offenders.count) importing CShims")
        XCTAssertGreaterThan(files, 100, "the scan found too few files")
        XCTAssertEqual(offenders, [], "only SystemLayer may import CShims: add a typed wrapper there and call that")
    }

    /// Each C library has exactly one importer, which fences it (no C type in its API): CShims → SystemLayer, CSodium and
    /// COpenSSL and CAESGCM → ProtectionCrypto (the AES-256-GCM implementations in its GCMContexts.swift only), CKeyutils → KernelKeyring, CTSS2
    /// (tpm2-tss) → TPMBinding, CSQLite → DataProtectionSQLite (the VFS implements SQLite's C contract, so that module is
    /// SQLite's edge). No other target of the package (library, executable or rig kept in this package) lists one
    /// among its dependencies or imports it in a Swift file.
    func testEachCLibraryHasOneImporter() throws {
        let manifest = try PackageManifest(contentsOf: Self.packageRoot.appendingPathComponent("Package.swift"))
        XCTAssertTrue(Set(manifest.targets.keys).isSuperset(of: Self.cLibraryOwners.keys), "Package.swift parsed wrongly")
        var offenders: [String] = []
        var files = 0
        for (name, target) in manifest.targets.sorted(by: { $0.key < $1.key }) where Self.cLibraryOwners[name] == nil {
            let allowed = Self.cLibraryOwners.filter { $0.value == name }.map(\.key)
            for c in Self.cLibraryOwners.keys where !allowed.contains(c) && target.dependencies.contains(c) {
                offenders.append("Package.swift: target '\(name)' depends on \(c)")
            }
            for file in try Self.swiftFiles(in: Self.packageRoot.appendingPathComponent(target.path)) {
                files += 1
                let text = try String(contentsOf: file, encoding: .utf8)
                for (i, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    guard let m = Self.importedModule(line), let c = Self.cLibraryOwners.keys.first(where: { m == $0 || m.hasPrefix($0 + ".") }) else { continue }
                    if allowed.contains(c), Self.cLibraryFiles[c].map({ $0 == file.lastPathComponent }) ?? true { continue }
                    offenders.append("\(file.path.dropFirst(Self.packageRoot.path.count + 1)):\(i + 1) imports \(c)")
                }
            }
        }
        print("module boundary: \(Self.cLibraryOwners.count) C libraries, \(files) Swift files scanned, \(offenders.count) importing one they do not own")
        XCTAssertEqual(offenders, [], "each C library has one importer (\(Self.cLibraryOwners)); add a typed wrapper there and call that")
    }

    /// The import check sees every spelling of the import and nothing else.
    func testTheImportCheckRecognisesEverySpelling() {
        for line in ["import CShims", "internal import CShims", "  @_implementationOnly import CShims", "public import CShims // x",
                     "import func CShims.dp_syncfs", "package import CShims"] {
            XCTAssertTrue(Self.importsCShims(line[...]), line)
        }
        for line in ["import CShimsExtra", "// import CShims", "import SystemLayer", "let x = \"import CShims\""] {
            XCTAssertFalse(Self.importsCShims(line[...]), line)
        }
    }

    /// The files moved onto the system layer reference none of the C library's file, directory, socket, mapping or
    /// lock calls (nor the Glibc overlay's wrappers of `open` and `fcntl`): read from the symbols their compiled
    /// objects import, so a call by any spelling counts and a comment or a method named `open` does not.
    func testMovedFilesMakeNoRawFileCalls() throws {
        var offenders: [String] = []
        for (module, files) in Self.movedFiles {
            let directory = try Self.objectDirectory(of: module)
            for file in files {
                let object = directory + "/" + file + ".o"
                XCTAssertTrue(FileManager.default.fileExists(atPath: object), "missing \(object): was \(module)/\(file) renamed? update the list")
                guard FileManager.default.fileExists(atPath: object) else { continue }
                let raw = try Self.undefinedSymbols(object).compactMap(Self.rawFileCall).sorted()
                if !raw.isEmpty { offenders.append("\(module)/\(file): \(raw.joined(separator: ", "))") }
            }
        }
        print("module boundary: \(Self.movedFiles.map(\.1.count).reduce(0, +)) files moved onto SystemLayer, \(offenders.count) still calling the system directly")
        XCTAssertEqual(offenders, [], "these files call the system directly; go through SystemLayer (its FileIO seam, OFDLock, UnixSocket, SharedPage)")
    }

    /// The symbol check catches a raw call and only that: it names SystemLayer's own objects (where the calls belong).
    func testTheSymbolCheckSeesRawCalls() throws {
        let directory = try Self.objectDirectory(of: "SystemLayer")
        let raw = Set(try Self.undefinedSymbols(directory + "/FileIO.swift.o").compactMap(Self.rawFileCall))
        XCTAssertTrue(raw.isSuperset(of: ["open", "pread", "pwrite", "fsync"]), "\(raw.sorted())")
        XCTAssertEqual(Self.rawFileCall("$s5Glibc4openys5Int32VSPys4Int8VG_ADs6UInt32VtF"), "open")
        XCTAssertEqual(Self.rawFileCall("$s5Glibc5fcntlys5Int32VAD_A2DtF"), "fcntl")
        XCTAssertNil(Self.rawFileCall("$s11SystemLayer6FileIOPAAE4openAA"))
        XCTAssertNil(Self.rawFileCall("memcpy"))
    }

    // MARK: What is checked

    /// The Swift files whose system calls this change moved into SystemLayer (issue 20), by module.
    static let movedFiles: [(String, [String])] = [
        ("DataProtection", ["Rotation.swift", "ProtectionDomain.swift"]),
        ("DataProtectionKeys", ["LiveLock.swift", "LiveState.swift", "DomainClassKeys.swift", "FileTree.swift", "DurableFile.swift"]),
        ("DataProtectionFiles", ["ChunkParallelism.swift", "ChunkWorkers.swift", "ProtectedFiles.swift", "ProtectedFiles+Sweep.swift"]),
        ("DataProtectionContainers", [
            "BackupPolicy.swift", "ConfinedFileIO.swift", "Confinement.swift", "InUseLock.swift", "Preferences.swift", "Purge.swift",
            "BundleSeal.swift", "Container.swift",
        ]),
        // The protected-database VFS: its files, locks and `-shm` go through DataProtection and SystemLayer (issue 21).
        ("DataProtectionSQLite", [
            "DatabaseError.swift", "DatabaseFile.swift", "DatabaseLocks.swift", "ProtectedDatabase.swift", "ProtectedVFS.swift", "WALIndex.swift",
        ]),
        ("FileCoordination", [
            "LockSupport.swift", "PresenterDelivery.swift", "PresenterHost.swift", "Rendezvous.swift", "Lease.swift", "ChangeWatcher.swift",
            "CoordinationDomain.swift",
        ]),
    ]

    /// C library calls on files, directories, sockets, mappings and locks: the system layer's job.
    static let fileCalls: Set<String> = [
        "open", "open64", "openat", "openat64", "creat", "read", "write", "pread", "pread64", "pwrite", "pwrite64", "readv", "writev",
        "close", "fsync", "fdatasync", "ftruncate", "ftruncate64", "truncate", "lseek", "lseek64", "fstat", "fstat64", "lstat", "lstat64",
        "stat", "stat64", "fstatat", "fstatat64", "statx", "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat",
        "renameat2", "link", "linkat", "symlink", "symlinkat", "readlink", "readlinkat", "opendir", "fdopendir", "readdir", "readdir64",
        "closedir", "dup", "dup2", "dup3", "fcntl", "fcntl64", "flock", "mmap", "mmap64", "munmap", "statfs", "fstatfs", "statvfs",
        "fstatvfs", "syncfs", "sync", "getxattr", "lgetxattr", "fgetxattr", "setxattr", "lsetxattr", "fsetxattr", "removexattr",
        "fremovexattr", "listxattr", "flistxattr", "socket", "bind", "listen", "connect", "accept", "accept4", "send", "sendto", "recv",
        "recvfrom", "poll", "syscall", "access", "faccessat", "chmod", "fchmod", "fchmodat", "chown", "fchown", "fchownat", "realpath",
        "utimensat", "futimens", "mknod", "mknodat", "mkfifo", "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
    ]

    /// The file call `symbol` makes: a C symbol of `fileCalls`, or the Glibc overlay's Swift wrapper of one
    /// (`$s5Glibc4open…` is Glibc.open); nil for anything else.
    static func rawFileCall(_ symbol: String) -> String? {
        if fileCalls.contains(symbol) { return symbol }
        guard symbol.hasPrefix("$s5Glibc") else { return nil }
        let rest = symbol.dropFirst("$s5Glibc".count)
        let digits = rest.prefix { $0.isNumber }
        guard let length = Int(digits) else { return nil }
        let name = String(rest.dropFirst(digits.count).prefix(length))
        return fileCalls.contains(name) ? name : nil
    }

    /// Which module each C library may be imported by (its fence).
    static let cLibraryOwners = [
        "CShims": "SystemLayer", "CSodium": "ProtectionCrypto", "COpenSSL": "ProtectionCrypto", "CAESGCM": "ProtectionCrypto", "CKeyutils": "KernelKeyring", "CTSS2": "TPMBinding",
        "CSQLite": "DataProtectionSQLite",
    ]
    /// Inside its owner, the one file a C library may be imported by, where one file is its whole fence.
    static let cLibraryFiles = ["COpenSSL": "GCMContexts.swift", "CAESGCM": "GCMContexts.swift"]

    static func importsCShims(_ line: Substring) -> Bool {
        guard let module = importedModule(line) else { return false }
        return module == "CShims" || module.hasPrefix("CShims.")
    }

    /// The module an `import` line names (any access level, attribute or declaration kind); nil for any other line.
    static func importedModule(_ line: Substring) -> Substring? {
        let code = line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        let words = code.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard let at = words.firstIndex(of: "import"), at + 1 < words.count else { return nil }
        guard words[..<at].allSatisfy({ $0.hasPrefix("@") || ["public", "package", "internal", "private", "fileprivate"].contains($0) }) else {
            return nil
        }
        let kinds: Set<Substring> = ["func", "var", "let", "struct", "class", "enum", "protocol", "typealias"]
        return kinds.contains(words[at + 1]) && at + 2 < words.count ? words[at + 2] : words[at + 1]
    }

    static func swiftFiles(in directory: URL) throws -> [URL] {
        guard let walk = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil) else { return [] }
        return walk.compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }
    }

    /// `<module>.build`, where SwiftPM leaves a module's objects: beside the running test bundle (or up to three
    /// directories above it, for nested bundle layouts).
    static func objectDirectory(of module: String) throws -> String {
        let bundle = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        var directory = URL(fileURLWithPath: bundle).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent(module + ".build").path
            if FileManager.default.fileExists(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        throw MissingObjects(module: module, bundle: bundle)
    }

    /// The symbols `object` imports (`nm -u`).
    static func undefinedSymbols(_ object: String) throws -> [String] {
        let nm = Process()
        nm.executableURL = URL(fileURLWithPath: "/usr/bin/nm")
        nm.arguments = ["-u", "--format=just-symbols", object]
        let out = Pipe()
        nm.standardOutput = out
        try nm.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        nm.waitUntilExit()
        XCTAssertEqual(nm.terminationStatus, 0, "nm \(object)")
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
    }
}

/// A module's objects are not next to the test bundle, where SwiftPM leaves them.
struct MissingObjects: Error, CustomStringConvertible {
    let module: String
    let bundle: String
    var description: String { "no \(module).build next to \(bundle) or above it; run `swift build --build-tests` first" }
}

/// The targets of Package.swift as far as this check needs them: name, source path, local dependencies, products.
struct PackageManifest {
    struct Target {
        var path: String
        var dependencies: Set<String>
    }

    var targets: [String: Target] = [:]
    var productTargets: Set<String> = []

    init(contentsOf url: URL) throws {
        let text = try String(contentsOf: url, encoding: .utf8)
        for call in Self.calls(in: text, named: [".target(", ".executableTarget(", ".systemLibrary("]) {
            guard let name = Self.string(after: "name:", in: call) else { continue }
            let path = Self.string(after: "path:", in: call) ?? "Sources/\(name)"
            targets[name] = Target(path: path, dependencies: Set(Self.list(after: "dependencies:", in: call)))
        }
        for call in Self.calls(in: text, named: [".library(", ".executable("]) {
            productTargets.formUnion(Self.list(after: "targets:", in: call))
        }
    }

    /// The products' targets and every local target they depend on, directly or not.
    func shippedTargets() -> Set<String> {
        var seen: Set<String> = []
        var work = Array(productTargets)
        while let name = work.popLast() {
            guard targets[name] != nil, seen.insert(name).inserted else { continue }
            work += targets[name]!.dependencies
        }
        return seen
    }

    /// The text of every call that starts with one of `names`, up to its balanced closing parenthesis.
    static func calls(in text: String, named names: [String]) -> [Substring] {
        var out: [Substring] = []
        for name in names {
            var from = text.startIndex
            while let start = text.range(of: name, range: from..<text.endIndex) {
                var depth = 1
                var i = start.upperBound
                while i < text.endIndex, depth > 0 {
                    if text[i] == "(" { depth += 1 } else if text[i] == ")" { depth -= 1 }
                    i = text.index(after: i)
                }
                out.append(text[start.upperBound..<i])
                from = i
            }
        }
        return out
    }

    /// The string literal after `label` in `call`.
    static func string(after label: String, in call: Substring) -> String? {
        guard let at = call.range(of: label) else { return nil }
        let rest = call[at.upperBound...].drop { $0 == " " || $0 == "\n" }
        guard rest.first == "\"" else { return nil }
        return String(rest.dropFirst().prefix { $0 != "\"" })
    }

    /// The top-level string literals of the `[...]` list after `label` (`.product(...)` entries are not local targets).
    static func list(after label: String, in call: Substring) -> [String] {
        guard let at = call.range(of: label), let open = call[at.upperBound...].firstIndex(of: "[") else { return [] }
        var names: [String] = []
        var depth = 0
        var i = call.index(after: open)
        while i < call.endIndex, call[i] != "]" || depth > 0 {
            switch call[i] {
            case "(": depth += 1
            case ")": depth -= 1
            case "\"" where depth == 0:
                let end = call[call.index(after: i)...].firstIndex(of: "\"") ?? call.endIndex
                names.append(String(call[call.index(after: i)..<end]))
                i = end
            default: break
            }
            i = call.index(after: i)
        }
        return names
    }
}
