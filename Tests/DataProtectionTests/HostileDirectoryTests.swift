import SystemLayer
import TestSupport
import Foundation
@_spi(Testing) import DataProtection  // the testing SPI: the file-system seam, test hooks
import ProtectionCrypto
import XCTest

/// A hostile directory (issue 19): symbolic links, hard links, FIFOs and directories planted at every journal and
/// temporary name, and forged journals, met by every operation that touches those names.
///
/// Each case builds a fresh directory with protected files, victims outside it (a plain file and a protected file
/// of the same domain) and one planted thing, runs one operation, then checks that no byte outside the protected
/// files the operation is about changed (every victim's bytes, every planted thing, and the listing of every
/// directory involved), and that the operation ended in a correct result or a `ProtectionError` (dpctl: a
/// documented exit status and a `dpctl: error:` line). Random temporary names (a replace's `.x.dp-<hex>.tmp`, the
/// keybag's and the device secret's older `.<name>.<hex>.tmp`, which sweeps still meet) are planted twice: at a name of that form beforehand (what
/// sweeps meet), and, through the `FileIO` seam, at the very name the library is about to create (an attacker who
/// guessed or raced it).
final class HostileDirectoryTests: DomainTestCase {
    enum Plant: String, CaseIterable { case symlink, danglingSymlink, hardLink, fifo, directory }
    enum Name: String, CaseIterable { case journal, fixedTemporary, randomTemporary, keybagTemporary, deviceSecretTemporary }
    enum Operation: String, CaseIterable {
        case openWriteSyncClose, readerRecovery, recover, recoverTree, dpctlRepair, put, dpctlPut, protect, unprotect, rotate, initDomain
    }
    enum Forgery: String, CaseIterable {
        case recordInHeader, recordPastEnd, recordUnaligned, otherFilesHeader, dataIsSymlinkToVictim, dataIsHardLinkToVictim, foreignOwner, hugeCommittedSize
    }

    let passphrase = "correct horse"
    let plainA = (0..<(3 * 4096 + 700)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    let plainB = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) }
    var domainID = ""
    var cases = 0, bytesChanged = 0, untyped = 0, wrong = 0
    var codes: [String: Int] = [:]

    /// One case's world: the directory of protected files, the victims outside it, and the domain's directories.
    struct World {
        var dir: String, outside: String
        var x: String { dir + "/x" }
        var p: String { dir + "/p" }
        var u: String { dir + "/u" }
        var victim: String { outside + "/victim" }
        var victimProtected: String { outside + "/victim.protected" }
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        let (d, _) = try makeDomain(passphrase: passphrase)
        domainID = d.id.description
    }

    func testHostileDirectory() throws {
        for name in Name.allCases {
            for plant in Plant.allCases {
                for op in Operation.allCases { try runCase(op, name: name, plant: plant) }
            }
        }
        for forgery in Forgery.allCases {
            for version in [1, 2] {
                for op in [Operation.openWriteSyncClose, .readerRecovery, .recover, .recoverTree, .dpctlRepair, .put, .rotate] {
                    try runCase(op, forgery: forgery, version: version)
                }
            }
        }
        print("hostile directory: \(cases) cases, \(bytesChanged) bytes changed outside, \(untyped) untyped errors, \(wrong) wrong results; outcomes: \(codes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))")
        XCTAssertEqual(bytesChanged, 0)
        XCTAssertEqual(untyped, 0)
        XCTAssertEqual(wrong, 0)
    }

    // MARK: - One case

    func runCase(_ op: Operation, name: Name? = nil, plant: Plant? = nil, forgery: Forgery? = nil, version: Int = 2) throws {
        cases += 1
        let label = "\(op.rawValue) / \(name.map { "\(plant!.rawValue) at \($0.rawValue)" } ?? "forged v\(version) journal: \(forgery!.rawValue)")"
        let w = World(dir: root + "/c\(cases)", outside: root + "/o\(cases)")
        for d in [w.dir, w.outside] { try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true) }
        let files = try ProtectionDomain.open(at: location, keyStore: store).files
        try files.write(plainA, to: w.x, protection: .none)
        try files.write(plainA, to: w.u, protection: .none)
        try writeBytes(plainB, w.p)
        try writeBytes((0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }, w.victim)
        try files.write(plainB, to: w.victimProtected, protection: .none)
        let newHome = w.dir + "-home", newDevices = w.dir + "-devices"

        var racing: [(String) -> Bool] = []
        var planted: [String] = []
        if let name, let plant {
            let target = op == .protect ? w.p : op == .unprotect ? w.u : w.x
            let dirOfKeybag = op == .initDomain ? newHome : location.home
            let dirOfSecret = op == .initDomain ? newDevices : location.deviceDirectory
            for d in [newHome, newDevices] where op == .initDomain { XCTAssertEqual(mkdir(d, 0o700), 0) }
            switch name {
            case .journal: planted = [ProtectedFiles.journalPath(for: target)]
            case .fixedTemporary: planted = [ProtectedFiles.temporaryPath(for: target)]
            case .randomTemporary:
                planted = ["\(w.dir)/.\(lastComponentOf(target)).dp-0123abcd.tmp"]
                racing = [{ $0.hasPrefix("\(w.dir)/.\(self.lastComponentOf(target)).dp-") && $0.hasSuffix(".tmp") }]
            case .keybagTemporary:
                planted = ["\(dirOfKeybag)/.keybag.0123abcd.tmp"]
                racing = [{ $0.hasPrefix("\(dirOfKeybag)/.keybag.") && $0.hasSuffix(".tmp") }]
            case .deviceSecretTemporary:
                planted = [op == .initDomain ? "\(dirOfSecret)/.0123.secret.0123abcd.tmp" : "\(dirOfSecret)/.\(domainID).secret.0123abcd.tmp"]
                racing = [{ $0.hasPrefix("\(dirOfSecret)/.") && $0.contains(".secret.") && $0.hasSuffix(".tmp") }]
            }
            for p in planted { try self.plant(plant, at: p, w) }
        }
        var forgedJournal: String?  // a forged journal of ours: recovery may discard it (a stale one is discarded)
        if let forgery {
            planted = try forge(forgery, version: version, w, files)
            if forgery != .foreignOwner { forgedJournal = planted.first }
        }
        if op == .readerRecovery { try tear(w.x) }

        let watched = [w.outside, w.dir, location.home, location.deviceDirectory] + (op == .initDomain ? [newHome, newDevices] : [])
        // The files the operation is about: the protected files, the keybag, a new domain's keybag and device secret.
        let ours = { (p: String) -> Bool in
            [w.x, w.p, w.u, self.location.keybagPath, self.location.journalPath, newHome + "/keybag", forgedJournal].contains(p) || (p.hasPrefix(newDevices + "/") && p.hasSuffix(".secret") && !p.hasPrefix(newDevices + "/."))
        }
        let before = try snapshot(watched, excluding: ours)
        let xBefore = Array(try readBytes(w.x)[(op == .rotate ? 176 : 0)...])  // a rotation rewrites the header
        let io = RacingIO(plant: plant ?? .symlink, matches: racing, world: w, test: self)

        let outcome = runWithTimeout(label) { () throws -> Bool in try self.perform(op, w, io: io, newHome: newHome, newDevices: newDevices) }
        switch outcome {
        case .success(let correct):
            codes["ok", default: 0] += 1
            if !correct { wrong += 1; XCTFail("\(label): the result is wrong") }
        case .failure(let e as ProtectionError):
            codes["\(e.code)", default: 0] += 1
            if ProcessInfo.processInfo.environment["HOSTILE_VERBOSE"] != nil { print("\(label): \(e.code): \(e.message)") }
            XCTAssertTrue(e.message.contains("'"), "\(label): the message names no file: \(e.message)")
        case .failure(let e as DpctlFailure):
            codes["dpctl exit \(e.status)", default: 0] += 1
            if !(64...79).contains(e.status) || !e.stderr.contains("dpctl: error:") { untyped += 1; XCTFail("\(label): dpctl \(e.status): \(e.stderr)") }
        case .failure(let e):
            untyped += 1
            XCTFail("\(label): untyped error \(e)")
        }
        var after = try snapshot(watched, excluding: ours)
        if let raced = io.racedPath {  // planted during the operation: it must still be there, as planted
            var st = stat()
            if lstat(raced, &st) != 0 { bytesChanged += 1; XCTFail("\(label): the thing planted at '\(raced)' was removed") }
            after = after.filter { $0.key != raced && !$0.key.hasPrefix(raced + "/") }
        }
        if let forgery, [.recordInHeader, .recordPastEnd, .recordUnaligned, .otherFilesHeader, .foreignOwner, .hugeCommittedSize].contains(forgery),
            ![.put, .openWriteSyncClose].contains(op), Array(try readBytes(w.x)[(op == .rotate ? 176 : 0)...]) != xBefore {
            bytesChanged += 1
            XCTFail("\(label): a forged journal changed '\(w.x)'")
        }
        let changed = Set(before.keys).symmetricDifference(after.keys).union(before.keys.filter { after[$0] != nil && after[$0] != before[$0] })
        if !changed.isEmpty {
            bytesChanged += changed.count
            XCTFail("\(label): changed outside the protected files: \(changed.sorted())")
        }
        // Planted things go (some are in the domain's directories, which every case shares).
        for p in planted + [io.racedPath].compactMap({ $0 }) { try? FileManager.default.removeItem(atPath: p) }
        if op == .rotate, FileManager.default.fileExists(atPath: location.journalPath) {
            // The failed rotation would resume with this case's files: finish it now that the planted things are gone.
            _ = try ProtectionDomain.open(at: location, keyStore: store).rotate(.none, paths: [], passphrase: try secret(passphrase))
        }
    }

    /// Runs `op`; returns whether its result is correct (it threw otherwise).
    func perform(_ op: Operation, _ w: World, io: RacingIO, newHome: String, newDevices: String) throws -> Bool {
        let domain = { () throws -> ProtectionDomain in try ProtectionDomain.open(at: self.location, keyStore: self.store, io: io) }
        let check = try ProtectionDomain.open(at: location, keyStore: store).files
        switch op {
        case .openWriteSyncClose:
            let h = try domain().files.open(w.x, forWriting: true)
            defer { h.close() }
            try h.write([UInt8](repeating: 0x5A, count: 100), at: 0)
            try h.sync()
            h.close()
            return try check.read(w.x) == [UInt8](repeating: 0x5A, count: 100) + plainA[100...]
        case .readerRecovery:
            _ = try domain().files.read(w.x)
            return false  // a torn chunk and no journal of ours: never plaintext
        case .recover:
            _ = try ProtectedFiles(keys: InMemoryClassKeys([]), io: io).recover(w.x)
            return try check.read(w.x) == plainA
        case .recoverTree:
            let report = try ProtectedFiles.recoverTree(w.dir, io: io)
            if let f = report.failures.first { throw f }
            return try check.read(w.x) == plainA
        case .dpctlRepair:
            try dpctl(["repair", w.dir])
            return try check.read(w.x) == plainA
        case .put:
            try domain().files.write(plainB, to: w.x, protection: .none)
            return try check.read(w.x) == plainB
        case .dpctlPut:
            try dpctl(["put", "--class", "none", "--from", w.p, w.x])
            return try check.read(w.x) == plainB
        case .protect:
            try domain().files.protectInPlace(w.p, as: .none)
            return try check.read(w.p) == plainB
        case .unprotect:
            try domain().files.unprotectInPlace(w.u)
            return try readBytes(w.u) == plainA
        case .rotate:
            let d = try domain()
            let before = try check.info(w.x).classKeyGeneration
            _ = try d.rotate(.none, paths: [w.dir], passphrase: try secret(passphrase))
            return try check.read(w.x) == plainA && ProtectionDomain.open(at: location, keyStore: store).files.info(w.x).classKeyGeneration == before + 1
        case .initDomain:
            let loc = DomainLocation(home: newHome, deviceDirectory: newDevices)
            let d = try ProtectionDomain.create(at: loc, passphrase: try secret(passphrase), kdf: .minimumForTests, keyStore: store, io: io) { _ in }
            try d.files.write(plainB, to: w.dir + "/n", protection: .none)
            defer { unlink(w.dir + "/n") }
            return try ProtectionDomain.open(at: loc, keyStore: store).files.read(w.dir + "/n") == plainB
        }
    }

    // MARK: - Planting and forging

    /// Puts `plant` at `path`: a link to a victim, a dangling link out of the directory, a hard link to a victim, a FIFO, a directory with a file.
    func plant(_ plant: Plant, at path: String, _ w: World) throws {
        switch plant {
        case .symlink: XCTAssertEqual(symlink(w.victim, path), 0)
        case .danglingSymlink: XCTAssertEqual(symlink(w.outside + "/created-through-a-link", path), 0)
        case .hardLink: XCTAssertEqual(link(w.victim, path), 0)
        case .fifo: XCTAssertEqual(mkfifo(path, 0o600), 0)
        case .directory:
            XCTAssertEqual(mkdir(path, 0o700), 0)
            try writeBytes([1, 2, 3], path + "/inside")
        }
    }

    /// Plants the forged journal `f` (format `version`) for `w.x`; returns the names planted.
    func forge(_ f: Forgery, version: Int, _ w: World, _ files: ProtectedFiles) throws -> [String] {
        let stride = 4096 + AEADCipher.preferred.overhead
        let xHeader = Array(try readBytes(w.x)[0..<176]), victimHeader = Array(try readBytes(w.victimProtected)[0..<176])
        let committed = Int64(try readBytes(w.x).count)
        var bound = xHeader, records: [(Int64, Int)] = [(176, stride)], size = committed
        switch f {
        case .recordInHeader: records = [(0, 176)]
        case .recordPastEnd: records = [(176 + 8 * Int64(stride), stride)]
        case .recordUnaligned: records = [(177, stride)]
        case .otherFilesHeader: bound = victimHeader
        case .dataIsSymlinkToVictim, .dataIsHardLinkToVictim:
            bound = victimHeader
            size = Int64(try readBytes(w.victimProtected).count)
            records = [(176, Int(size) - 176)]
            unlink(w.x)
            XCTAssertEqual(f == .dataIsSymlinkToVictim ? symlink(w.victimProtected, w.x) : link(w.victimProtected, w.x), 0)
        case .foreignOwner: break
        case .hugeCommittedSize: size = 1 << 46
        }
        let journal = ProtectedFiles.journalPath(for: w.x)
        try writeBytes(try forgedJournal(version: version, binding: bound, committed: size, records: records), journal)
        if f == .foreignOwner { XCTAssertEqual(chown(journal, 65534, 65534), 0) }
        return [journal]
    }

    /// A journal with valid checksums, built from FORMAT.md §6.7.2 alone (version 1: bound by file identifier; 2: by header hash).
    func forgedJournal(version: Int, binding dataHeader: [UInt8], committed: Int64, records: [(offset: Int64, length: Int)]) throws -> [UInt8] {
        func be(_ v: UInt64, _ n: Int) -> [UInt8] { (0..<n).map { UInt8(truncatingIfNeeded: v >> (8 * UInt64(n - 1 - $0))) } }
        func h(_ parts: [UInt8]...) throws -> [UInt8] {
            var all: [UInt8] = []
            for p in parts { all += p }
            return try all.withUnsafeBytes { try GenericHash.hash($0) }
        }
        let bound = version == 1 ? Array(dataHeader[24..<40]) : try h(dataHeader)
        var header = [0x89, 0x44, 0x50, 0x4A, 0x0D, 0x0A, 0x1A, 0x0A, UInt8(version), 1] + [UInt8](repeating: 0, count: 6) + bound
        header += be(UInt64(committed), 8) + be(0, 8) + [9, 8, 7, 6, 5, 4, 3, 2] + [UInt8](repeating: 0, count: 8)
        let chain = try h(header)
        var out = header + chain
        for r in records {
            let head = [1, 0, 0, 0] + be(UInt64(r.length), 4) + be(UInt64(bitPattern: r.offset), 8)
            let payload = [UInt8](repeating: 0xEE, count: r.length)
            out += head + payload + (try h(chain, head, payload))
        }
        return out
    }

    /// Zeroes part of chunk 1 of `path`, as a torn write would.
    func tear(_ path: String) throws {
        let p = path
        var raw = try readBytes(p)
        let at = 176 + 4096 + AEADCipher.preferred.overhead + 100
        for i in at..<(at + 500) where i < raw.count { raw[i] = 0 }
        try writeBytes(raw, p)
    }

    // MARK: - Observation

    /// Every entry below `dirs` (not following links) but `excluding`: type, link target or bytes.
    func snapshot(_ dirs: [String], excluding: (String) -> Bool) throws -> [String: String] {
        var out: [String: String] = [:]
        func visit(_ p: String) throws {
            var st = stat()
            guard lstat(p, &st) == 0 else { return }
            if excluding(p) { return }
            switch st.st_mode & S_IFMT {
            case S_IFDIR:
                out[p] = "dir"
                for n in (try? FileManager.default.contentsOfDirectory(atPath: p)) ?? [] { try visit(p + "/" + n) }
            case S_IFLNK: out[p] = "link -> " + ((try? FileManager.default.destinationOfSymbolicLink(atPath: p)) ?? "?")
            case S_IFREG: out[p] = "file " + hexString(try h(readBytes(p)))
            default: out[p] = "mode \(st.st_mode & S_IFMT)"
            }
        }
        for d in dirs { try visit(d) }
        return out
    }

    func h(_ b: [UInt8]) throws -> [UInt8] { try b.withUnsafeBytes { try GenericHash.hash($0) } }

    func lastComponentOf(_ p: String) -> String { String(p.split(separator: "/").last ?? "") }

    /// Runs `body` on another thread; a call that blocks (on a FIFO) for 20 s fails the test instead of hanging it.
    func runWithTimeout(_ label: String, _ body: @escaping () throws -> Bool) -> Result<Bool, any Error> {
        final class Box: @unchecked Sendable { var result: Result<Bool, any Error> = .failure(CocoaError(.featureUnsupported)) }
        let box = Box()
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) let run = body
        Thread {
            box.result = Result { try run() }
            done.signal()
        }.start()
        if done.wait(timeout: .now() + 20) == .timedOut {
            XCTFail("\(label): blocked for 20 s (a FIFO opened without O_NONBLOCK?)")
            fatalError("\(label): blocked")
        }
        return box.result
    }

    // MARK: - dpctl

    struct DpctlFailure: Error { var status: Int32; var stderr: String }

    /// Runs the real dpctl binary built beside this test bundle against the test's domain.
    func dpctl(_ arguments: [String]) throws {
        let bundle = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: bundle).deletingLastPathComponent().appendingPathComponent("dpctl")
        p.arguments = arguments
        p.environment = childEnvironment([
            "PATH": "/usr/bin:/bin", "HOME": root, "DATAPROTECTION_HOME": location.home, "DATAPROTECTION_DEVICE_DIR": location.deviceDirectory,
            "DATAPROTECTION_KEYRING": "session",
        ])
        let e = Pipe()
        p.standardError = e
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        let err = String(decoding: e.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw DpctlFailure(status: p.terminationStatus, stderr: err) }
    }
}

/// A seam that plants a hostile thing at the very name the library is about to create with `O_EXCL` (first time
/// only), simulating an attacker who raced or guessed a random temporary name; every call then goes to the system.
final class RacingIO: ForwardingIO, @unchecked Sendable {
    let plant: HostileDirectoryTests.Plant
    let matches: [(String) -> Bool]
    let world: HostileDirectoryTests.World
    weak var test: HostileDirectoryTests?
    private(set) var racedPath: String?

    init(plant: HostileDirectoryTests.Plant, matches: [(String) -> Bool], world: HostileDirectoryTests.World, test: HostileDirectoryTests) {
        self.plant = plant
        self.matches = matches
        self.world = world
        self.test = test
    }

    func open(_ path: String, flags: Int32, mode: mode_t) throws(SystemError) -> Int32 {
        if racedPath == nil, flags & O_EXCL != 0, matches.contains(where: { $0(path) }) {
            racedPath = path
            try? test?.plant(plant, at: path, world)
        }
        return try SystemFileIO().open(path, flags: flags, mode: mode)
    }

    func openAt(_ directory: Int32, _ name: String, flags: Int32, mode: mode_t) throws(SystemError) -> Int32 {
        let path = directoryPath(directory) + "/" + name
        if racedPath == nil, flags & O_EXCL != 0, matches.contains(where: { $0(path) }) {
            racedPath = path
            try? test?.plant(plant, at: path, world)
        }
        return try SystemFileIO().openAt(directory, name, flags: flags, mode: mode)
    }
}
