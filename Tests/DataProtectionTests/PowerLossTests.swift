import SystemLayer
@_spi(Testing) import CrashScenarios
import Foundation
@_spi(Testing) import DataProtection  // the testing SPI: the file-system seam, test hooks
import ProtectionCrypto
import XCTest

/// Simulated power loss (issue 8 item 2): each operation runs through `PowerLossIO`, the power is cut
/// after every one of its disk-changing calls, and the unsynced writes and directory operations are
/// dropped or reordered as a disk could (the model is described on `PowerLossIO`). Then fresh
/// objects on the real system calls open everything and check the crash harness's invariants
/// (`Scenario.verify`): every file authenticates and holds an old or a new state (per chunk for
/// in-place writes), nothing acknowledged is lost, no temporary litter survives the next open, and
/// the keybag unlocks with the old or the new passphrase.
///
/// Litter is what is left after the verifier's writable opens and its repair pass
/// (`ProtectedFiles.recoverTree`, what `dpctl repair` runs).
/// `DP_POWERLOSS_TRIALS` sets the random reboots per cut point (default 3, fewer past 50 cut points).
/// Without the rollback journal (a build before branch `journal`), in-place writes, appends and truncates
/// are expected to tear: those tests then skip, saying what failed, instead of passing. Rotation is not run
/// here: it makes its batches durable with `syncfs`, which the seam does not carry (CrashHarnessTests
/// covers it with real processes).
final class PowerLossTests: XCTestCase {
    func testAtomicWrite() throws { try powerLoss(.atomicWrite) }
    func testInPlaceWrites() throws { try powerLoss(.inPlaceWrites) }
    func testAppend() throws { try powerLoss(.append) }
    func testTruncate() throws { try powerLoss(.truncate) }
    func testProtectTree() throws { try powerLoss(.protectTree) }
    func testUnprotectTree() throws { try powerLoss(.unprotectTree) }
    func testPassphraseChange() throws { try powerLoss(.passphraseChange) }
    /// A protected SQLite database (issue 21): 8 transactions (`CrashScenarios/DatabaseScenario.swift`), the VFS's file
    /// I/O through the seam (the domain's `ProtectedFiles` carries it to `ProtectedVFS`). Hundreds of calls: a sample of
    /// the cut points (every call that orders the disk, the one before it, and seeded others; `DP_POWERLOSS_CUTS`).
    func testDatabaseRollbackJournal() throws { try powerLoss(.databaseRollback, cutPoints: Self.databaseCutPoints) }
    func testDatabaseWAL() throws { try powerLoss(.databaseWAL, cutPoints: Self.databaseCutPoints) }
    /// WAL at `synchronous = NORMAL` with a checkpointing second connection: the commit marks of the WAL's log are made
    /// durable, and the log emptied, by the checkpointer's sync before its copy into the database (FORMAT.md §6.7.6).
    func testDatabaseWALNormalWithACheckpointer() throws { try powerLoss(.databaseWALNormal, cutPoints: Self.databaseCutPoints) }
    /// WAL at `synchronous = NORMAL`, several commits between two syncs of the WAL: the reboot makes the log's marks
    /// count for nothing, so the WAL goes back to its last sync, never to a state between two commits.
    func testDatabaseWALLogBetweenCheckpoints() throws { try powerLoss(.databaseWALLog, cutPoints: Self.databaseCutPoints) }
    /// Rollback-journal mode at `synchronous = NORMAL`: each transaction creates its journal anew, and the VFS syncs the
    /// directory at the journal's first sync (as SQLite's unix VFS does), before SQLite overwrites the database's pages.
    func testDatabaseRollbackJournalAtNormal() throws { try powerLoss(.databaseRollbackNormal, cutPoints: Self.databaseCutPoints) }

    /// The model itself: unsynced data and names can go, fsynced ones stay.
    func testModelDropsOnlyWhatWasNotSynced() throws {
        let dir = try temporaryDirectory(self)
        try FileManager.default.createDirectory(atPath: dir + "/t", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir + "/stash", withIntermediateDirectories: true)
        var outcomes = Set<String>()
        for seed in 0..<64 {
            try? FileManager.default.removeItem(atPath: dir + "/t/a")
            try? FileManager.default.removeItem(atPath: dir + "/t/b")
            let io = PowerLossIO(cutAfter: nil, stash: dir + "/stash")
            let a = try io.open(dir + "/t/a", flags: O_RDWR | O_CREAT | O_EXCL, mode: 0o600)
            try [UInt8](repeating: 1, count: 8192).withUnsafeBytes { try io.writeFully(a, from: $0, at: 0) }
            try io.fsync(a)
            try io.syncDirectory(of: dir + "/t/a")  // a: 8 KiB of ones, durable
            try [UInt8](repeating: 2, count: 8192).withUnsafeBytes { try io.writeFully(a, from: $0, at: 0) }  // unsynced
            io.close(a)
            let b = try io.open(dir + "/t/b", flags: O_RDWR | O_CREAT | O_EXCL, mode: 0o600)  // unsynced name
            io.close(b)
            var rng = TestRNG(seed: UInt64(seed))
            try io.powerCut(root: dir + "/t", using: &rng)
            let pages = try readBytes(dir + "/t/a")
            XCTAssertEqual(pages.count, 8192)
            XCTAssertTrue(pages.allSatisfy { $0 == 1 || $0 == 2 })
            outcomes.insert("\(pages[0])\(pages[4096])\(FileManager.default.fileExists(atPath: dir + "/t/b"))")
        }
        XCTAssertTrue(outcomes.contains("12true") || outcomes.contains("12false"), "pages are dropped independently: \(outcomes)")
        XCTAssertTrue(outcomes.contains { $0.hasSuffix("false") } && outcomes.contains { $0.hasSuffix("true") }, "an unsynced name may or may not survive: \(outcomes)")
    }

    /// Opening a domain removes the temporaries an interrupted keybag write left, and only those:
    /// one whose writer still holds its lock is in use and stays.
    func testDomainOpenSweepsDeadTemporariesOnly() throws {
        let dir = try temporaryDirectory(self)
        let s = Scenario(.passphraseChange, root: dir + "/d")
        try s.prepare()
        let dead = s.location.home + "/.keybag.0dead.tmp", live = s.location.home + "/.keybag.11fe.tmp", other = s.location.home + "/.notes.tmp"
        for p in [dead, live, other] { try writeBytes([1, 2, 3], p) }
        let fd = open(live, O_WRONLY | O_CLOEXEC)
        defer { close(fd) }
        XCTAssertEqual(ofdLock(fd), 0)
        _ = try s.open()
        XCTAssertFalse(FileManager.default.fileExists(atPath: dead), "a dead writer's temporary survived the open")
        XCTAssertTrue(FileManager.default.fileExists(atPath: live), "a temporary still being written was removed")
        XCTAssertTrue(FileManager.default.fileExists(atPath: other), "a file the keybag does not own was removed")
        // The keybag still unlocks after a passphrase change with the lock still held elsewhere.
        let d = try s.open()
        try d.changePassphrase(old: try SecretBytes(utf8: "old passphrase"), new: try SecretBytes(utf8: "new passphrase"))
        try d.unlock(passphrase: try SecretBytes(utf8: "new passphrase"))
    }

    /// Cut points per database scenario (about 60 ms a trial); `DP_POWERLOSS_CUTS` overrides, 0 for every call.
    static var databaseCutPoints: Int { ProcessInfo.processInfo.environment["DP_POWERLOSS_CUTS"].flatMap(Int.init) ?? 200 }

    /// The calls to cut after: all `count` of them when they are at most `budget` (or `budget` is 0); else every call that
    /// orders the disk and the call before it (the most unsynced state a barrier meets), then seeded others up to `budget`.
    static func cutPoints(count: Int, barriers: [Int], budget: Int) -> [Int] {
        guard budget > 0, count > budget else { return Array(1...count) }
        var chosen = Set(barriers.flatMap { [$0 - 1, $0] }.filter { (1...count).contains($0) })
        var rng = TestRNG(seed: UInt64(count))
        var rest = (1...count).filter { !chosen.contains($0) }
        rest.shuffle(using: &rng)
        chosen.formUnion(rest.prefix(max(0, budget - chosen.count)))
        return chosen.sorted()
    }

    private func powerLoss(_ op: CrashOp, cutPoints budget: Int = 0, file: StaticString = #filePath, line: UInt = #line) throws {
        // The model decides what is durable, so the real fsyncs buy nothing: the long database runs use tmpfs.
        let dir = try temporaryDirectory(self, "powerloss-\(op.rawValue)", under: budget > 0 ? "/dev/shm/" : NSTemporaryDirectory())
        let template = dir + "/template", trial = dir + "/trial", stash = dir + "/stash"
        try Scenario(op, root: template).prepare()
        try FileManager.default.createDirectory(atPath: stash, withIntermediateDirectories: true)
        let scenario = Scenario(op, root: trial)

        // The dry run counts the operation's disk-changing calls (the domain's open and unlock make none).
        try reset(trial, from: template)
        let dry = PowerLossIO(cutAfter: nil, stash: stash, traced: true)
        try scenario.run(try scenario.open(io: dry)) { _ in }
        let count = dry.count
        XCTAssertGreaterThan(count, 0)
        let cuts = Self.cutPoints(count: count, barriers: dry.barriers, budget: budget)

        // Three reboots per cut point, fewer for long operations (about 150 trials each); DP_POWERLOSS_TRIALS overrides.
        let trials = ProcessInfo.processInfo.environment["DP_POWERLOSS_TRIALS"].flatMap(Int.init) ?? max(1, min(3, 150 / cuts.count))
        var torn = 0, lost = 0, litter = 0, runs = 0
        var failures: [String] = [], knownFailures: [String] = []
        var known: [String: Int] = [:]
        for cut in cuts {
            for t in 0..<trials {
                try reset(trial, from: template)
                let io = PowerLossIO(cutAfter: cut, stash: stash)
                var acked = 0
                do { try scenario.run(try scenario.open(io: io)) { acked = $0 } } catch {}  // the cut stops it with EIO
                var rng = TestRNG(seed: UInt64(cut * 1000 + t))
                try io.powerCut(root: trial, using: &rng)
                let v = scenario.verify(acked: acked)
                torn += v.torn.count; lost += v.lostAcked.count; litter += v.litter.count; runs += 1
                guard !v.ok else { continue }
                let report = "cut after call \(cut) (\(dry.calls[cut - 1])), reboot \(t), acked \(acked): \(v.details.prefix(3).joined(separator: "; "))"
                let classes = v.details.map { Self.knownDatabaseDefect($0, op, database: trial + "/data/f") }
                if classes.contains(nil) {
                    failures.append(report)
                } else {
                    knownFailures.append(report)
                    for c in Set(classes.compactMap { $0 }) { known[c, default: 0] += 1 }
                }
            }
        }
        let sampled = cuts.count < count ? " (\(cuts.count) of \(count) calls: \(dry.barriers.count) barriers and the calls before them, the rest seeded)" : ""
        print("power-loss \(op.rawValue): \(cuts.count) cut points\(sampled) × \(trials) reboots = \(runs) trials, torn \(torn), lost-acked \(lost), litter \(litter)")
        for f in failures.prefix(20) { print("  " + f) }
        XCTAssertEqual(failures, [], "\(op.rawValue): \(failures.count) of \(runs) power cuts break an invariant", file: file, line: line)
        guard !known.isEmpty else { return }
        let summary = known.sorted { $0.key < $1.key }.map { "\($0.value) trials: \($0.key)" }.joined(separator: "; ")
        print("  known defects (\(knownFailures.count) of \(runs) trials): \(summary)")
        for f in knownFailures.prefix(6) { print("  known: " + f) }
        if ProcessInfo.processInfo.environment["DP_POWERLOSS_STRICT"] == "1" {
            XCTFail("\(op.rawValue): \(knownFailures.count) of \(runs) power cuts hit known defects: \(summary)", file: file, line: line)
        } else {
            throw XCTSkip("\(op.rawValue): \(knownFailures.count) of \(runs) power cuts hit known defects (DP_POWERLOSS_STRICT=1 fails instead): \(summary)")
        }
    }

    /// The class of a database verdict's detail when it is a defect found by this model and not yet fixed (reported on
    /// issue 21; docs/TESTING.md), else nil: anything else fails the test.
    ///
    /// - "journal/WAL tail torn": SQLite's journal or WAL whose header or last chunk never reached the disk: SQLite
    ///   tolerates garbage there (it reads the journal's tail for a super-journal name), the protected file fails to open
    ///   or authenticate instead.
    /// - "DELETE at FULL not durable": SQLite commits a DELETE-mode transaction by unlinking its journal without syncing
    ///   the directory at `synchronous = FULL` (only EXTRA syncs it), so the cut can bring the hot journal back and roll
    ///   an acknowledged transaction back: SQLite's documented behaviour, not the library's. Gone at EXTRA.
    static func knownDatabaseDefect(_ detail: String, _ op: CrashOp, database: String) -> String? {
        guard [.databaseRollback, .databaseWAL, .databaseWALNormal, .databaseWALLog, .databaseRollbackNormal].contains(op) else { return nil }
        if detail.hasPrefix("torn: "), detail.contains("'\(database)-journal'") || detail.contains("'\(database)-wal'"),
            detail.contains("no protected-file magic") || detail.contains("failed authentication")
                || detail.contains("of the database '\(database)': it does not start as a protected file")
                || detail.contains("of the database '\(database)': part of it fails authentication")
        {
            return "journal/WAL tail torn"
        }
        if op == .databaseRollback, detail.hasPrefix("lost-acked: ") { return "DELETE at FULL not durable" }
        return nil
    }

    /// `cp -a template trial`, waited for with `waitpid` (Foundation's `waitUntilExit` polls its run loop: ~0.1 s a trial).
    private func reset(_ trial: String, from template: String) throws {
        try? FileManager.default.removeItem(atPath: trial)
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = ["/bin/cp", "-a", template, trial].map { (s: String) in strdup(s) } + [nil]
        defer { argv.forEach { free($0) } }
        XCTAssertEqual(posix_spawn(&pid, "/bin/cp", nil, nil, argv, environ), 0)
        var status: Int32 = 0
        XCTAssertEqual(waitpid(pid, &status, 0), pid)
        XCTAssertEqual(status, 0, "cp -a \(template) \(trial)")
    }
}

/// Takes an exclusive OFD lock on all of `fd` (`F_OFD_SETLK`, 37 on Linux), as a writer holds on its temporary file.
func ofdLock(_ fd: Int32) -> Int32 {
    var fl = flock()
    fl.l_type = Int16(F_WRLCK)
    fl.l_whence = Int16(SEEK_SET)
    return withUnsafeMutablePointer(to: &fl) { fcntl(fd, 37, $0) }
}
