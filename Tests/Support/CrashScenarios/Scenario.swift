@_spi(Testing) import DataProtection
import ProtectionCrypto

#if canImport(Glibc)
import Glibc
#endif

/// The operations the crash harness interrupts (issue 8): each one prepares a known state,
/// runs against a `FileIO` that may stop at any point, and is judged by `Scenario.verify`.
public enum CrashOp: String, CaseIterable, Sendable {
    case atomicWrite = "atomic-write"
    case inPlaceWrites = "in-place-writes"
    case append
    case truncate
    case protectTree = "protect-tree"
    case unprotectTree = "unprotect-tree"
    case passphraseChange = "passphrase-change"
    case rotate
    /// A protected SQLite database: a stream of transactions in rollback-journal mode (DatabaseScenario.swift).
    case databaseRollback = "database-rollback"
    /// The same in WAL mode, checkpointing every 10 pages.
    case databaseWAL = "database-wal"
    /// WAL at `synchronous = NORMAL`, with a second connection checkpointing after every commit: commits are marks in
    /// the WAL's log (FORMAT.md §6.7.6), and the checkpointer's sync must make them durable before it copies their
    /// frames into the database. A power loss may lose acknowledged transactions here (SQLite's NORMAL), never leave
    /// one in part or an inconsistent database; a killed process loses none.
    case databaseWALNormal = "database-wal-normal"
    /// WAL at `synchronous = NORMAL` with no checkpointer but one checkpoint (the writer's own, after transaction 4):
    /// the WAL's log holds several commit marks between its syncs. A killed process loses no acknowledged transaction
    /// (its log keeps the last mark); a power loss goes back to the last sync at most, never to a state in between.
    case databaseWALLog = "database-wal-log"
    /// Rollback-journal mode (DELETE) at `synchronous = NORMAL`: SQLite syncs each new journal once, then the database.
    /// The journal is created anew by every transaction, so its name must be durable (the directory synced) before the
    /// database's pages are overwritten, as SQLite's unix VFS makes it. A power loss may lose acknowledged transactions
    /// (the journal's unlink is not synced), never leave one in part.
    case databaseRollbackNormal = "database-rollback-normal"
    /// `DatabaseUnit.protect` of a plain database (DatabaseScenario.swift).
    case databaseProtect = "database-protect"
    /// `DatabaseUnit.rotate` of a protected database with its persistent journal.
    case databaseRotate = "database-rotate"
}

extension CrashOp {
    /// The number of steps `run` acknowledges when it completes.
    public var steps: Int {
        switch self {
        case .inPlaceWrites: 12
        case .append: 10
        case .truncate: Scenario.truncateSizes.count
        case .protectTree, .unprotectTree: 5
        case .atomicWrite, .passphraseChange, .rotate, .databaseProtect, .databaseRotate: 1
        case .databaseRollback, .databaseWAL, .databaseWALNormal, .databaseWALLog, .databaseRollbackNormal: Scenario.databaseTransactions
        }
    }
}

/// What a crash left behind, judged against the operation's invariants.
public struct Verdict: Sendable {
    /// Files that fail to authenticate, or hold bytes that belong to no state of the operation.
    public var torn: [String] = []
    /// Data (or a state) acknowledged before the crash that is gone.
    public var lostAcked: [String] = []
    /// Temporary or journal files still there after the next writable open or repair pass.
    public var litter: [String] = []

    public init() {}
    /// No invariant is broken.
    public var ok: Bool { torn.isEmpty && lostAcked.isEmpty && litter.isEmpty }
    public var summary: String { "torn=\(torn.count) lost-acked=\(lostAcked.count) litter=\(litter.count)" }
    public var details: [String] {
        torn.map { "torn: " + $0 } + lostAcked.map { "lost-acked: " + $0 } + litter.map { "litter: " + $0 }
    }
}

/// One operation on one directory tree: `<root>/home` (keybag), `<root>/devices` (device secret), `<root>/data` (files).
///
/// Every byte the operation writes comes from a fixed seed, so a fresh process
/// knows each state the files may legitimately be in: state 0 is the prepared
/// one, state k the one after step k. `run` acknowledges step k (through `ack`)
/// only once it is durable (after `sync()`, or when a whole-file call returned);
/// `verify` then demands a state at or after the last acknowledged step.
public struct Scenario: Sendable {
    public let op: CrashOp
    public let root: String

    public init(_ op: CrashOp, root: String) {
        self.op = op
        self.root = root
    }

    public var location: DomainLocation { DomainLocation(home: root + "/home", deviceDirectory: root + "/devices") }
    public var data: String { root + "/data" }
    var file: String { data + "/f" }
    /// A copy of the keybag before the passphrase change (outside the home).
    var keybagBefore: String { root + "/keybag-before" }
    static let chunkSize = 4096
    static let oldPassphrase = "old passphrase", newPassphrase = "new passphrase"
    static var options: ProtectedFileOptions { ProtectedFileOptions(chunkSize: chunkSize) }

    // MARK: The three phases

    /// Creates the domain (in-process key store, fastest Argon2id) and the operation's starting files.
    public func prepare() throws {
        for d in [root, data] where mkdir(d, 0o700) != 0 && errno != EEXIST { throw ScenarioError(d, errno) }
        let d = try ProtectionDomain.create(
            at: location, passphrase: try SecretBytes(utf8: Self.oldPassphrase), kdf: .minimumForTests, keyStore: .inProcess,
            fileOptions: Self.options) { _ in }
        try d.unlock(passphrase: try SecretBytes(utf8: Self.oldPassphrase))
        switch op {
        case .atomicWrite, .inPlaceWrites, .append, .truncate, .passphraseChange:
            try d.files.write(Self.states(op)[0], to: file, protection: .complete)
            // What a backup holds: after the change this copy must not open with the old passphrase.
            if op == .passphraseChange { try writePlain(try readPlain(location.keybagPath), keybagBefore) }
        case .protectTree, .unprotectTree, .rotate:
            for dir in [data + "/t", data + "/t/sub"] where mkdir(dir, 0o700) != 0 { throw ScenarioError(dir, errno) }
            for (path, bytes) in treeFiles() {
                if op == .rotate { try d.files.write(bytes, to: path, protection: .complete) } else { try writePlain(bytes, path) }
                if op == .unprotectTree { try d.files.protectInPlace(path, as: .complete) }
            }
        case .databaseRollback, .databaseWAL, .databaseWALNormal, .databaseWALLog, .databaseRollbackNormal:
            try prepareDatabase(d)
        case .databaseProtect, .databaseRotate:
            try prepareDatabaseUnit(d)
        }
    }

    /// Opens the domain through `io` (the real calls when nil) and unlocks it with the old passphrase (what the operation
    /// runs on). Testing SPI, as the seam it takes is.
    @_spi(Testing) public func open(io: (any FileIO)? = nil) throws -> ProtectionDomain {
        let d = try ProtectionDomain.open(at: location, keyStore: .inProcess, fileOptions: Self.options, io: io ?? SystemFileIO())
        try d.unlock(passphrase: try SecretBytes(utf8: Self.oldPassphrase))
        return d
    }

    /// Performs the operation on `d`, calling `ack(k)` once step k is durable.
    public func run(_ d: ProtectionDomain, ack: (Int) -> Void) throws {
        switch op {
        case .atomicWrite:
            try d.files.write(Self.states(op)[1], to: file, protection: .complete)
            ack(1)
        case .inPlaceWrites:
            let h = try d.files.open(file, forWriting: true)
            defer { h.close() }
            for (i, w) in Self.inPlaceWrites().enumerated() {
                try h.write(w.bytes, at: Int64(w.offset))
                if (i + 1) % 3 == 0 { try h.sync(); ack(i + 1) }
            }
        case .append:
            let h = try d.files.open(file, forWriting: true)
            defer { h.close() }
            for (i, piece) in Self.appendPieces().enumerated() {
                try h.append(piece)
                if (i + 1) % 2 == 0 { try h.sync(); ack(i + 1) }
            }
        case .truncate:
            let h = try d.files.open(file, forWriting: true)
            defer { h.close() }
            for (i, size) in Self.truncateSizes.enumerated() {
                try h.truncate(to: Int64(size))
                if (i + 1) % 2 == 0 { try h.sync(); ack(i + 1) }
            }
        case .protectTree:
            for (i, (path, _)) in treeFiles().enumerated() {
                try d.files.protectInPlace(path, as: .complete)
                ack(i + 1)
            }
        case .unprotectTree:
            for (i, (path, _)) in treeFiles().enumerated() {
                try d.files.unprotectInPlace(path)
                ack(i + 1)
            }
        case .passphraseChange:
            try d.changePassphrase(old: try SecretBytes(utf8: Self.oldPassphrase), new: try SecretBytes(utf8: Self.newPassphrase))
            ack(1)
        case .rotate:
            _ = try d.rotate(.complete, paths: [data + "/t"], passphrase: try SecretBytes(utf8: Self.oldPassphrase))
            ack(1)
        case .databaseRollback, .databaseWAL, .databaseWALNormal, .databaseWALLog, .databaseRollbackNormal:
            try runDatabase(d, ack: ack)
        case .databaseProtect, .databaseRotate:
            try runDatabaseUnit(d, ack: ack)
        }
    }

    /// Opens everything afresh (real system calls) and checks the invariants, given the last acknowledged step (0: none).
    ///
    /// Handle files are opened for writing, which is where an interrupted
    /// in-place write is recovered; rotation is resumed and must complete.
    public func verify(acked requested: Int) -> Verdict {
        var v = Verdict()
        let acked = min(max(0, requested), op.steps)
        let d: ProtectionDomain
        do { d = try ProtectionDomain.open(at: location, keyStore: .inProcess, fileOptions: Self.options) } catch {
            v.torn.append("the domain does not open: \(error)")
            return v
        }
        switch op {
        case .passphraseChange:
            let oldWorks = unlocks(d, Self.oldPassphrase), newWorks = unlocks(d, Self.newPassphrase)
            if !oldWorks && !newWorks { v.torn.append("the keybag unlocks with neither the old nor the new passphrase") }
            if acked >= 1 && !newWorks { v.lostAcked.append("the passphrase change returned, but the new passphrase does not unlock") }
            if oldWorks || newWorks { checkWhole(d, Self.states(op), acked: 0, &v) }
            if newWorks && oldCopyUnlocks() { v.torn.append("the new passphrase unlocks, but the keybag copy from before still unlocks with the old one (the old device secret survived)") }
        case .rotate:
            guard unlocks(d, Self.oldPassphrase) else { v.torn.append("the keybag does not unlock"); return v }
            verifyRotation(d, acked: acked, &v)
        default:
            guard unlocks(d, Self.oldPassphrase) else { v.torn.append("the keybag does not unlock"); return v }
            switch op {
            case .atomicWrite: checkWhole(d, Self.states(op), acked: acked, &v)
            case .inPlaceWrites, .truncate: checkChunks(d, Self.states(op), acked: acked, &v)
            case .append: checkAppend(d, acked: acked, &v)
            case .databaseRollback, .databaseWAL, .databaseWALNormal, .databaseWALLog, .databaseRollbackNormal: verifyDatabase(d, acked: acked, &v)
            case .databaseProtect, .databaseRotate: verifyDatabaseUnit(d, acked: acked, &v)
            default: checkTree(d, acked: acked, &v)
            }
        }
        // What a restarting service (or `dpctl repair`) does: a dead writer's temporary files and
        // journals go; read-only opens never look for them (they stay one system call cheap).
        if case .failure(let e) = Result(catching: { () throws(ProtectionError) in try ProtectedFiles.recoverTree(data) }) {
            v.torn.append("repair of \(data) failed: \(e)")
        }
        v.litter += litter(d)
        return v
    }

    // MARK: Seeded contents

    struct Write { var offset: Int, bytes: [UInt8] }

    static let inPlaceSize = 16 * chunkSize
    static let truncateSizes = [30_000, 30_001, 8000, 45_000, 4096, 20_000, 0, 12_345]

    /// Twelve writes inside a 64 KiB file, up to 9,000 bytes each (so most span two or three chunks).
    static func inPlaceWrites() -> [Write] {
        var rng = SeededBytes(seed: 11)
        return (0..<12).map { _ in
            let len = 1 + rng.int(9000)
            return Write(offset: rng.int(inPlaceSize - len + 1), bytes: rng.bytes(len))
        }
    }

    static func appendPieces() -> [[UInt8]] {
        var rng = SeededBytes(seed: 12)
        return (0..<10).map { _ in rng.bytes(1 + rng.int(9000)) }
    }

    /// State k of a single-file operation: the file's plaintext after step k.
    static func states(_ op: CrashOp) -> [[UInt8]] {
        var rng = SeededBytes(seed: 1)
        switch op {
        case .atomicWrite: return [rng.bytes(37_000), rng.bytes(70_000)]
        case .inPlaceWrites:
            var s = [rng.bytes(inPlaceSize)]
            for w in inPlaceWrites() {
                var next = s.last!
                next.replaceSubrange(w.offset..<(w.offset + w.bytes.count), with: w.bytes)
                s.append(next)
            }
            return s
        case .append:
            var s = [rng.bytes(10_000)]
            for p in appendPieces() { s.append(s.last! + p) }
            return s
        case .truncate:
            var s = [rng.bytes(50_000)]
            for size in truncateSizes {
                var next = s.last!
                if size < next.count { next.removeSubrange(size...) } else { next += [UInt8](repeating: 0, count: size - next.count) }
                s.append(next)
            }
            return s
        default: return [rng.bytes(5000)]
        }
    }

    /// The tree of protect-tree, unprotect-tree and rotate: sorted paths with their plaintext (one empty, one multi-chunk).
    func treeFiles() -> [(String, [UInt8])] {
        var rng = SeededBytes(seed: 21)
        return [("a", 100), ("b", 0), ("c", 20_000), ("sub/d", 5000), ("sub/e", 9000)].map { (data + "/t/" + $0.0, rng.bytes($0.1)) }
    }

    // MARK: Checks

    /// Whether the keybag copy from before the passphrase change, put back on this machine, unlocks with the old passphrase.
    private func oldCopyUnlocks() -> Bool {
        let old = DomainLocation(home: root + "/home-before", deviceDirectory: location.deviceDirectory)
        guard mkdir(old.home, 0o700) == 0 || errno == EEXIST, (try? writePlain(try readPlain(keybagBefore), old.keybagPath)) != nil else { return true }
        do { return unlocks(try ProtectionDomain.open(at: old, keyStore: .inProcess, fileOptions: Self.options), Self.oldPassphrase) } catch { return false }
    }

    private func unlocks(_ d: ProtectionDomain, _ passphrase: String) -> Bool {
        do { try d.unlock(passphrase: try SecretBytes(utf8: passphrase)); return true } catch { return false }
    }

    /// The plaintext of `path`, opened for writing (so an interrupted in-place write is recovered first).
    private func contents(_ d: ProtectionDomain, _ path: String, forWriting: Bool) throws -> [UInt8] {
        let h = try d.files.open(path, forWriting: forWriting)
        defer { h.close() }
        return try h.read(at: 0, count: Int(try h.size))
    }

    /// The whole file equals state k for some k ≥ acked.
    private func checkWhole(_ d: ProtectionDomain, _ states: [[UInt8]], acked: Int, _ v: inout Verdict) {
        let got: [UInt8]
        do { got = try contents(d, file, forWriting: false) } catch { v.torn.append("\(file): \(error)"); return }
        guard let k = states.lastIndex(of: got) else { v.torn.append("\(file): \(got.count) bytes that are no state of the operation"); return }
        if k < acked { v.lostAcked.append("\(file): holds state \(k), but step \(acked) was acknowledged") }
    }

    /// The size is that of some state ≥ acked, and each chunk equals the same bytes of some state ≥ acked.
    private func checkChunks(_ d: ProtectionDomain, _ states: [[UInt8]], acked: Int, _ v: inout Verdict) {
        let got: [UInt8]
        do { got = try contents(d, file, forWriting: true) } catch { v.torn.append("\(file): \(error)"); return }
        let sized = states.indices.filter { states[$0].count == got.count }
        if sized.isEmpty { v.torn.append("\(file): size \(got.count) is the size of no state"); return }
        if !sized.contains(where: { $0 >= acked }) { v.lostAcked.append("\(file): size \(got.count) is only that of states before acknowledged step \(acked)") }
        var start = 0
        while start < got.count {
            let r = start..<min(start + Self.chunkSize, got.count)
            let matching = states.indices.filter { states[$0].count >= r.upperBound && states[$0][r].elementsEqual(got[r]) }
            if matching.isEmpty {
                v.torn.append("\(file): chunk \(start / Self.chunkSize) is in no state of the operation")
            } else if !matching.contains(where: { $0 >= acked }) {
                v.lostAcked.append("\(file): chunk \(start / Self.chunkSize) is older than acknowledged step \(acked) (states \(matching))")
            }
            start = r.upperBound
        }
    }

    /// The file is a prefix of everything appended, at least as long as the acknowledged state.
    private func checkAppend(_ d: ProtectionDomain, acked: Int, _ v: inout Verdict) {
        let states = Self.states(.append), all = states.last!
        let got: [UInt8]
        do { got = try contents(d, file, forWriting: true) } catch { v.torn.append("\(file): \(error)"); return }
        if got.count > all.count || !all[..<got.count].elementsEqual(got) {
            v.torn.append("\(file): \(got.count) bytes that are not a prefix of the appended stream")
        } else if got.count < states[acked].count {
            v.lostAcked.append("\(file): \(got.count) bytes, but \(states[acked].count) were acknowledged")
        }
    }

    /// Each file of the tree is its plaintext, protected or plain; acknowledged conversions stayed converted.
    private func checkTree(_ d: ProtectionDomain, acked: Int, _ v: inout Verdict) {
        for (i, (path, want)) in treeFiles().enumerated() {
            var isProtected = true
            do { _ = try d.files.info(path) } catch {
                if error.code == .notProtected { isProtected = false } else { v.torn.append("\(path): \(error)"); continue }
            }
            let got: [UInt8]
            do { got = isProtected ? try contents(d, path, forWriting: false) : try readPlain(path) } catch { v.torn.append("\(path): \(error)"); continue }
            if got != want { v.torn.append("\(path): \(isProtected ? "protected" : "plain") contents differ from the original") }
            if i < acked && isProtected != (op == .protectTree) {
                v.lostAcked.append("\(path): converted and acknowledged, but \(isProtected ? "protected" : "plain") again")
            }
        }
    }

    /// Files readable before resuming; an acknowledged rotation is complete; a resumed one completes.
    private func verifyRotation(_ d: ProtectionDomain, acked: Int, _ v: inout Verdict) {
        func state() throws -> (gens: [UInt32], fileGens: Set<UInt32>, journal: Bool) {
            let c = try d.status().classes.first { $0.protectionClass == .complete }!
            return (c.generations, Set(try treeFiles().map { try d.files.info($0.0).classKeyGeneration }), access(location.journalPath, F_OK) == 0)
        }
        func readable(_ when: String) {
            for (path, want) in treeFiles() {
                do { if try contents(d, path, forWriting: false) != want { v.torn.append("\(path) (\(when)): wrong contents") } } catch {
                    v.torn.append("\(path) (\(when)): \(error)")
                }
            }
        }
        readable("before resuming")
        do {
            let before = try state()
            let finished = before.gens == [2] && before.fileGens == [2] && !before.journal
            if acked >= 1 && !finished { v.lostAcked.append("rotation returned, but generations \(before.gens), files at \(before.fileGens), journal \(before.journal)") }
            if !finished { _ = try d.rotate(.complete, paths: [data + "/t"], passphrase: try SecretBytes(utf8: Self.oldPassphrase)) }
            let after = try state()
            if after.gens != [2] || after.fileGens != [2] || after.journal {
                v.torn.append("the rotation did not complete on resume: generations \(after.gens), files at \(after.fileGens), journal \(after.journal)")
            }
        } catch { v.torn.append("resuming the rotation: \(error)") }
        readable("after resuming")
    }

    /// Names in the home, the device directory and the data tree that the operation does not own.
    private func litter(_ d: ProtectionDomain) -> [String] {
        var out: [String] = []
        let expectedData: Set<String> = switch op {
        case .protectTree, .unprotectTree, .rotate: ["t", "t/a", "t/b", "t/c", "t/sub", "t/sub/d", "t/sub/e"]
        // SQLite's own files: a journal that is not hot (SQLite left it empty, as with its unix VFS: the next write
        // transaction reuses it), a WAL and its index. The library's temporaries and chunk journals are still litter.
        case .databaseRollback, .databaseWAL, .databaseWALNormal, .databaseWALLog, .databaseRollbackNormal, .databaseProtect, .databaseRotate: ["f", "f-journal", "f-wal", "f-shm"]
        default: ["f"]
        }
        let owned: [(String, Set<String>)] = [(location.home, ["keybag"]), (location.deviceDirectory, ["\(d.id).secret"]), (data, expectedData)]
        for (dir, expected) in owned {
            for name in listTree(dir) where !expected.contains(name) { out.append("\(dir)/\(name)") }
        }
        return out
    }
}

/// A system call of the harness itself failed.
struct ScenarioError: Error, CustomStringConvertible {
    let path: String, errno: Int32
    init(_ path: String, _ errno: Int32) { self.path = path; self.errno = errno }
    var description: String { "\(path): \(String(cString: strerror(errno)))" }
}

/// Relative paths of everything below `dir`, sorted.
func listTree(_ dir: String, _ prefix: String = "") -> [String] {
    guard let h = opendir(dir) else { return [] }
    var names: [(String, Bool)] = []
    while let e = readdir(h) {
        let name = String(cString: (UnsafeRawPointer(e) + MemoryLayout<dirent>.offset(of: \dirent.d_name)!).assumingMemoryBound(to: CChar.self))  // in place: copying d_name reads past readdir's buffer
        if name != "." && name != ".." { names.append((name, e.pointee.d_type == UInt8(DT_DIR))) }
    }
    closedir(h)
    var out: [String] = []
    for (name, isDir) in names.sorted(by: { $0.0 < $1.0 }) {
        out.append(prefix + name)
        if isDir { out += listTree(dir + "/" + name, prefix + name + "/") }
    }
    return out
}

func writePlain(_ bytes: [UInt8], _ path: String) throws {
    let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw ScenarioError(path, errno) }
    defer { Glibc.close(fd) }
    try SystemFileIO().writeAll(fd, bytes)
}

func readPlain(_ path: String) throws -> [UInt8] {
    let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw ScenarioError(path, errno) }
    defer { Glibc.close(fd) }
    var out: [UInt8] = [], buf = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = buf.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        guard n >= 0 else { throw ScenarioError(path, errno) }
        if n == 0 { return out }
        out += buf[..<n]
    }
}

extension FileIO {
    /// Writes all of `bytes` at offset 0 through this seam.
    func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws {
        var done = 0
        while done < bytes.count {
            done += try bytes.withUnsafeBytes { try pwrite(fd, from: UnsafeRawBufferPointer(rebasing: $0[done...]), at: Int64(done)) }
        }
    }
}

/// Deterministic test bytes (SplitMix64); never for keys.
public struct SeededBytes {
    var state: UInt64
    public init(seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    public mutating func int(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
    public mutating func bytes(_ n: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: n), i = 0
        while i < n {
            var x = next()
            for _ in 0..<8 where i < n { out[i] = UInt8(truncatingIfNeeded: x); x >>= 8; i += 1 }
        }
        return out
    }
}
