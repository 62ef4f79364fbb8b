import SystemLayer
import Foundation
@_spi(Testing) import DataProtection  // the testing SPI: the file-system seam, test hooks
import ProtectionCrypto
import Synchronization
import XCTest

/// A `FileIO` that passes calls to the real system calls but makes the Nth one fail.
///
/// It simulates what disks and kernels do to a writer: an I/O error (EIO), a full
/// disk (ENOSPC), an interrupted call (EINTR), or a write that stores only part of
/// its bytes (a short write, which is not an error); once, or for every call from
/// the Nth on (a device that went away).
final class FaultyIO: FileIO {
    enum Mode: String, CaseIterable { case eio, enospc, eintr, shortWrite }
    let real = SystemFileIO()
    let failAt: Int, mode: Mode, forever: Bool
    let calls = Atomic<Int>(0)
    let fired = Atomic<Bool>(false)

    init(failAt: Int, mode: Mode, forever: Bool) { self.failAt = failAt; self.mode = mode; self.forever = forever }

    /// Whether this call fails (and records that a fault fired).
    func hit(_ isWrite: Bool = false, transfer isTransfer: Bool = false) -> Bool {
        let n = calls.add(1, ordering: .relaxed).newValue
        guard forever ? n >= failAt : n == failAt else { return false }
        if mode == .shortWrite && !isWrite { return false }
        // EINTR: the FileIO contract has implementations retry it (SystemFileIO does); the layer
        // also retries it on transfers, which is where an interrupted call can have moved bytes.
        if mode == .eintr && !isTransfer { return false }
        fired.store(true, ordering: .relaxed)
        return true
    }
    var errnoValue: Int32 { mode == .eio ? EIO : (mode == .enospc ? ENOSPC : EINTR) }

    func open(_ path: String, flags: Int32, mode m: mode_t) throws(SystemError) -> Int32 {
        if hit() { throw SystemError(errnoValue) }
        return try real.open(path, flags: flags, mode: m)
    }
    func close(_ fd: Int32) { real.close(fd) }
    func pread(_ fd: Int32, into b: UnsafeMutableRawBufferPointer, at o: Int64) throws(SystemError) -> Int {
        if hit(transfer: true) { throw SystemError(errnoValue) }
        return try real.pread(fd, into: b, at: o)
    }
    func pwrite(_ fd: Int32, from b: UnsafeRawBufferPointer, at o: Int64) throws(SystemError) -> Int {
        if hit(true, transfer: true) {
            if mode == .shortWrite { return try real.pwrite(fd, from: UnsafeRawBufferPointer(rebasing: b[0..<max(1, b.count / 2)]), at: o) }
            throw SystemError(errnoValue)
        }
        return try real.pwrite(fd, from: b, at: o)
    }
    func fsync(_ fd: Int32) throws(SystemError) { if hit() { throw SystemError(errnoValue) }; try real.fsync(fd) }
    func ftruncate(_ fd: Int32, to s: Int64) throws(SystemError) { if hit() { throw SystemError(errnoValue) }; try real.ftruncate(fd, to: s) }
    func size(_ fd: Int32) throws(SystemError) -> Int64 { if hit() { throw SystemError(errnoValue) }; return try real.size(fd) }
    func rename(_ a: String, to b: String) throws(SystemError) { if hit() { throw SystemError(errnoValue) }; try real.rename(a, to: b) }
    func unlink(_ p: String) throws(SystemError) { if hit() { throw SystemError(errnoValue) }; try real.unlink(p) }
    func openAt(_ d: Int32, _ n: String, flags: Int32, mode m: mode_t) throws(SystemError) -> Int32 {
        if hit() { throw SystemError(errnoValue) }
        return try real.openAt(d, n, flags: flags, mode: m)
    }
    func renameAt(_ d: Int32, _ a: String, to b: String) throws(SystemError) { if hit() { throw SystemError(errnoValue) }; try real.renameAt(d, a, to: b) }
    func unlinkAt(_ d: Int32, _ n: String) throws(SystemError) { if hit() { throw SystemError(errnoValue) }; try real.unlinkAt(d, n) }
    func identityAt(_ d: Int32, _ n: String) throws(SystemError) -> (device: UInt64, inode: UInt64) {
        if hit() { throw SystemError(errnoValue) }
        return try real.identityAt(d, n)
    }
    func copyUserAttributes(at d: Int32, from n: String, to fd: Int32) throws(SystemError) {
        if hit() { throw SystemError(errnoValue) }
        try real.copyUserAttributes(at: d, from: n, to: fd)
    }
}

final class FaultInjectionTests: XCTestCase {
    /// Whole-file atomic replace under a fault at every call position: the file holds
    /// exactly the old or the new contents, the caller gets a typed error, and (for a
    /// one-off fault) no temporary file is left behind.
    /// Simulates EIO and ENOSPC at every file-system call a container's creation makes through the seam (its plain
    /// metadata files are written by the one atomic replace): each failure is a typed error and leaves no temporary
    /// file, and at least one fault fires (before the system layer's funnel, container writes called write/fsync
    /// directly and no fault reached them).
    func testContainerMetadataWritesUnderEveryFault() throws {
        let dir = try temporaryDirectory(self)
        let keys = try InMemoryClassKeys.random()
        var fired = 0
        for mode in [FaultyIO.Mode.eio, .enospc] {
            for n in 1...40 {
                let io = FaultyIO(failAt: n, mode: mode, forever: false)
                var options = Container.OpenOptions()
                options.io = io
                let root = "\(dir)/c-\(mode)-\(n)"
                do throws(ProtectionError) {
                    let c = try Container.create(at: root, keys: keys, options: options)
                    c.close()
                } catch {
                    XCTAssertTrue(io.fired.load(ordering: .relaxed), "\(mode) at call \(n): failed without a fault: \(error.message)")
                }
                if io.fired.load(ordering: .relaxed) { fired += 1 }
                let leftovers = try FileManager.default.contentsOfDirectory(atPath: root).filter { $0.hasSuffix(".tmp") }
                XCTAssertEqual(leftovers, [], "\(mode) at call \(n): temporary files left")
            }
        }
        XCTAssertGreaterThan(fired, 0, "no fault reached a container write")
    }

    func testAtomicReplaceUnderEveryFault() throws {
        let dir = try temporaryDirectory(self)
        let keys = try InMemoryClassKeys.random()
        let good = ProtectedFiles(keys: keys, options: .init(chunkSize: 4096))
        let old = [UInt8](repeating: 1, count: 10_000), new = [UInt8](repeating: 2, count: 70_000)
        var points = 0, failures = 0
        for mode in FaultyIO.Mode.allCases {
            for forever in [false, true] where !(forever && mode != .eio && mode != .enospc) {
                var n = 1
                let caseDir = "\(dir)/\(mode)-\(forever)"
                try FileManager.default.createDirectory(atPath: caseDir, withIntermediateDirectories: true)
                while true {
                    let path = "\(caseDir)/f-\(n)"
                    try good.write(old, to: path, protection: .complete)
                    let io = FaultyIO(failAt: n, mode: mode, forever: forever)
                    let faulty = ProtectedFiles(keys: keys, options: .init(chunkSize: 4096), io: io)
                    var threw = false
                    do { try faulty.write(new, to: path, protection: .complete) } catch {
                        threw = true
                        failures += 1
                        XCTAssertTrue([.io(EIO), .io(ENOSPC)].contains(error.code), "\(mode) at \(n): \(error.code)")
                        XCTAssertTrue(error.message.contains(path), "the error names the file: \(error.message)")
                    }
                    // Old or new, never anything else. A fault after the rename (the directory
                    // fsync) leaves the new contents in place and still reports the error,
                    // because their durability is not assured.
                    let now = try good.read(path)
                    XCTAssertTrue(threw ? (now == old || now == new) : now == new, "\(mode) at call \(n): the file holds neither the old nor the new contents")
                    if !forever {
                        let litter = try FileManager.default.contentsOfDirectory(atPath: caseDir).filter { $0.hasSuffix(".tmp") }
                        XCTAssertEqual(litter, [], "\(mode) at call \(n): temporary files left behind")
                    }
                    points += 1
                    if !io.fired.load(ordering: .relaxed) { break }  // the whole operation ran without reaching call n
                    n += 1
                }
            }
        }
        print("fault injection (atomic replace): \(points) fault points × modes, \(failures) typed failures, 0 invariant violations")
    }

    /// In-place handle operations under a fault at every call position (FORMAT.md §6.7).
    ///
    /// Each case opens a committed file for writing through the faulty seam, makes
    /// change A, syncs, makes change B, syncs and closes. Afterwards a fresh
    /// `ProtectedFiles` opens the file for writing (which recovers) and checks: the
    /// file authenticates; it holds exactly the old contents, the contents after A
    /// or after B (so every chunk is old or new); once the first `sync()` returned,
    /// never the old contents (acknowledged data is not lost), and once the
    /// sequence finished, B; no journal or temporary file is left; every failure
    /// reached the caller as a typed error naming the file.
    func testHandleOperationsUnderEveryFault() throws {
        let dir = try temporaryDirectory(self)
        let keys = try InMemoryClassKeys.random()
        let options = ProtectedFileOptions(chunkSize: 4096)
        let good = ProtectedFiles(keys: keys, options: options)
        var rng = TestRNG(seed: 42)
        let old = rng.bytes(9 * 4096 + 300)
        typealias Change = (ProtectedFileHandle) throws(ProtectionError) -> Void
        let patch = rng.bytes(10_000), tail = rng.bytes(12_000)
        let operations: [(String, Change, Change)] = [
            ("write in place", { (h) throws(ProtectionError) in try h.write(patch, at: 3000) }, { (h) throws(ProtectionError) in try h.write(Array(patch[0..<100]), at: 30_000) }),
            ("append", { (h) throws(ProtectionError) in try h.append(tail) }, { (h) throws(ProtectionError) in try h.append(Array(tail[0..<5000])) }),
            ("truncate shrink", { (h) throws(ProtectionError) in try h.truncate(to: 20_000) }, { (h) throws(ProtectionError) in try h.truncate(to: 4096) }),
            ("truncate extend", { (h) throws(ProtectionError) in try h.truncate(to: 50_000) }, { (h) throws(ProtectionError) in try h.truncate(to: 70_001) }),
        ]
        /// The contents after applying `change` to `bytes`, computed on a scratch file with the real seam.
        func model(_ bytes: [UInt8], _ change: Change, _ name: String) throws -> [UInt8] {
            let p = "\(dir)/model-\(name)"
            try good.write(bytes, to: p, protection: .complete)
            let h = try good.open(p, forWriting: true)
            try change(h)
            h.close()
            return try good.read(p)
        }
        var points = 0, failures = 0, violations = 0
        for (name, a, b) in operations {
            let afterA = try model(old, a, "a"), afterB = try model(afterA, b, "b")
            for mode in FaultyIO.Mode.allCases {
                for forever in [false, true] where !(forever && mode != .eio && mode != .enospc) {
                    let caseDir = "\(dir)/\(name.filter { $0.isLetter })-\(mode)-\(forever)"
                    try FileManager.default.createDirectory(atPath: caseDir, withIntermediateDirectories: true)
                    var n = 1
                    while true {
                        let path = "\(caseDir)/f\(n)"
                        try good.write(old, to: path, protection: .complete)
                        let io = FaultyIO(failAt: n, mode: mode, forever: forever)
                        let faulty = ProtectedFiles(keys: keys, options: options, io: io)
                        var synced = 0
                        var handle: ProtectedFileHandle?
                        do throws(ProtectionError) {
                            let h = try faulty.open(path, forWriting: true)
                            handle = h
                            try a(h)
                            try h.sync()
                            synced = 1
                            try b(h)
                            try h.sync()
                            synced = 2
                        } catch {
                            failures += 1
                            if ![.io(EIO), .io(ENOSPC)].contains(error.code) || !error.message.contains(path) {
                                violations += 1
                                XCTFail("\(name), \(mode) at call \(n): \(error.code): \(error.message)")
                            }
                        }
                        handle?.close()
                        handle = nil
                        let where_ = "\(name), \(mode)\(forever ? " forever" : "") at call \(n)"
                        let h = try good.open(path, forWriting: true)  // recovers
                        let now = try h.read(at: 0, count: Int(try h.size))
                        h.close()
                        let allowed = synced == 2 ? [afterB] : (synced == 1 ? [afterA, afterB] : [old, afterA, afterB])
                        if !allowed.contains(now) {
                            violations += 1
                            XCTFail("\(where_): after \(synced) syncs the file holds \(now.count) bytes that are none of the allowed contents")
                        }
                        let litter = try FileManager.default.contentsOfDirectory(atPath: caseDir).filter { $0.hasSuffix(".dpjournal") || $0.hasSuffix(".tmp") }
                        if !litter.isEmpty {
                            violations += 1
                            XCTFail("\(where_): left \(litter)")
                        }
                        try FileManager.default.removeItem(atPath: path)
                        points += 1
                        if !io.fired.load(ordering: .relaxed) { break }
                        n += 1
                    }
                }
            }
        }
        print("fault injection (handle write, append, truncate, sync): \(points) fault points × modes, \(failures) typed failures, \(violations) invariant violations")
        XCTAssertEqual(violations, 0)
    }

    /// Reads through a faulty seam fail with a typed error and never return partial plaintext.
    func testReadsUnderFaultsReturnAllOrNothing() throws {
        let dir = try temporaryDirectory(self)
        let keys = try InMemoryClassKeys.random()
        let data = (0..<50_000).map { UInt8(truncatingIfNeeded: $0) }
        try ProtectedFiles(keys: keys, options: .init(chunkSize: 4096)).write(data, to: "\(dir)/r", protection: .complete)
        var n = 1
        while true {
            let io = FaultyIO(failAt: n, mode: .eio, forever: false)
            do {
                let got = try ProtectedFiles(keys: keys, io: io).read("\(dir)/r")
                XCTAssertEqual(got, data, "a read that succeeded must return the exact plaintext")
            } catch {
                XCTAssertEqual(error.code, .io(EIO))
            }
            if !io.fired.load(ordering: .relaxed) { break }
            n += 1
        }
        XCTAssertGreaterThan(n, 3)
    }
}
