import FileCoordination
import Foundation
import Locking
@_spi(Testing) import DataProtection  // the testing SPI: the file-system seam, test hooks
// @testable: gives the internal purge a model of free space per Confinement, to test its order without filling a disk.
@testable import DataProtectionContainers
import TestSupport
import XCTest

/// Purge empties tmp and Caches, oldest first, never in a container in use, never a file being written.
final class ContainerPurgeTests: XCTestCase {
    /// Fills a closed container: purgeable files with distinct ages, and user data.
    func fill(_ root: String, keys: InMemoryClassKeys) throws -> [String] {
        let c = try Container(at: root, keys: keys)
        defer { c.close() }
        try c.createDirectory("Library/Caches/thumbs")
        let purgeable = ["tmp/a", "Library/Caches/b", "Library/Caches/thumbs/c", "tmp/d"]
        for (i, p) in purgeable.enumerated() {
            try c.write([UInt8](repeating: UInt8(i), count: 1000 * (i + 1)), to: p)
            // Ages: tmp/a oldest … tmp/d newest.
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_000_000 + Double(i) * 3600)], ofItemAtPath: root + "/" + p)
        }
        try c.write(Array("keep".utf8), to: "Documents/keep.txt")
        try c.write(Array("keep".utf8), to: "Library/Application Support/keep.db")
        return purgeable
    }

    func exists(_ root: String, _ p: String) -> Bool { FileManager.default.fileExists(atPath: root + "/" + p) }

    func testPurgeAllEmptiesTmpAndCachesOnlyAndKeepsTheTags() throws {
        let (c, keys, root) = try makeContainer(self)
        c.close()
        let purgeable = try fill(root, keys: keys)
        let report = try Purge.run(containerAt: root)
        XCTAssertFalse(report.skippedInUse)
        XCTAssertEqual(report.removed.map(\.path), purgeable, "oldest first")
        XCTAssertEqual(report.freedBytes, report.removed.reduce(0) { $0 + $1.size })
        for p in purgeable { XCTAssertFalse(exists(root, p), p) }
        XCTAssertFalse(exists(root, "Library/Caches/thumbs"), "emptied subdirectories go too")
        for p in ["Documents/keep.txt", "Library/Application Support/keep.db", "Library/Caches/CACHEDIR.TAG", "tmp/CACHEDIR.TAG", "Library/Caches", "tmp"] {
            XCTAssertTrue(exists(root, p), p)
        }
        XCTAssertEqual(try Purge.run(containerAt: root).removed.count, 0)
    }

    func testPurgeUntilFreeSpaceStopsOnceEnoughIsFreeOldestFirst() throws {
        let (c, keys, root) = try makeContainer(self)
        c.close()
        let purgeable = try fill(root, keys: keys)
        // A nearly full filesystem: free space is a budget minus what the purgeable files hold.
        let budget: Int64 = 1_000_000
        let model: (Confinement) -> Int64 = { _ in
            budget - purgeable.reduce(Int64(0)) { sum, p in
                sum + ((try? FileManager.default.attributesOfItem(atPath: root + "/" + p)[.size] as? Int).flatMap { Int64($0) } ?? 0)
            }
        }
        let sizes = purgeable.map { Int64((try! FileManager.default.attributesOfItem(atPath: root + "/" + $0)[.size] as! Int)) }
        let total = sizes.reduce(0, +)
        // Wanting just over what freeing the two oldest gives: exactly those two go.
        let want = budget - total + sizes[0] + sizes[1] - 1
        let report = try Purge.run(containerAt: root, options: PurgeOptions(target: .untilFreeBytes(want)), freeBytes: model)
        XCTAssertEqual(report.removed.map(\.path), Array(purgeable.prefix(2)))
        XCTAssertTrue(exists(root, purgeable[2]) && exists(root, purgeable[3]))
        // With the real filesystem: 0 bytes wanted removes nothing; more than the disk holds removes all.
        XCTAssertEqual(try Purge.run(containerAt: root, options: PurgeOptions(target: .untilFreeBytes(0))).removed.count, 0)
        let all = try Purge.run(containerAt: root, options: PurgeOptions(target: .untilFreeBytes(.max)))
        XCTAssertEqual(all.removed.map(\.path), Array(purgeable.suffix(2)))
        XCTAssertGreaterThan(all.freeBytesAfter, 0)
    }

    func testPurgeSkipsAContainerThisOrAnotherLiveProcessHoldsInUse() throws {
        let (c, keys, root) = try makeContainer(self)
        c.close()
        let purgeable = try fill(root, keys: keys)
        // In this process.
        let open = try Container(at: root, keys: keys)
        XCTAssertTrue(try Purge.run(containerAt: root).skippedInUse)
        open.close()
        // In another process.
        let holder = try Holder(root: root)
        let report = try Purge.run(containerAt: root)
        XCTAssertTrue(report.skippedInUse)
        XCTAssertEqual(report.removed.count, 0)
        for p in purgeable { XCTAssertTrue(exists(root, p), p) }
        // A waiting purge runs once the holder exits.
        let finished = DispatchSemaphore(value: 0)
        let result = Locked<PurgeReport?>(nil)
        Thread.detachNewThread {
            let r = try? Purge.run(containerAt: root, options: PurgeOptions(waitIfInUse: true))
            result.withLock { $0 = r }
            finished.signal()
        }
        for p in purgeable { XCTAssertTrue(exists(root, p), "removed while the holder is alive: \(p)") }
        try holder.release()
        finished.wait()
        let waited = result.withLock { $0 }
        XCTAssertEqual(waited?.skippedInUse, false)
        XCTAssertEqual(waited?.removed.map(\.path), purgeable)
    }

    func testPurgeLeavesAFileOpenForWriting() throws {
        let (c, _, root) = try makeContainer(self)
        let h = try c.create("Library/Caches/live.bin")
        try h.write(Array(repeating: 7, count: 5000), at: 0)
        try c.write(Array("old".utf8), to: "Library/Caches/old.bin")
        c.close()  // no longer in use, but the handle is still writing
        let first = try Purge.run(containerAt: root)
        XCTAssertEqual(first.skippedBusy, ["Library/Caches/live.bin"])
        XCTAssertEqual(first.removed.map(\.path), ["Library/Caches/old.bin"])
        try h.sync()
        h.close()
        XCTAssertEqual(try Purge.run(containerAt: root).removed.map(\.path), ["Library/Caches/live.bin"])
    }

    func testPurgeNeverRemovesAnItemUnderCoordinatedAccessInAnotherProcess() throws {
        let (c, _, root) = try makeContainer(self)
        try c.write(Array("busy".utf8), to: "Library/Caches/busy.bin")
        try c.write(Array("idle".utf8), to: "Library/Caches/idle.bin")
        c.close()
        // Another process writes busy.bin under coordination (the container-root domain, as both sides choose).
        let writer = try Holder(try builtProduct("coordination-worker"), ["hold", "--root", root, "--item", "Library/Caches/busy.bin", "--mode", "write"], ready: "held")
        let options = PurgeOptions(coordination: .containerRoot)
        let first = try Purge.run(containerAt: root, options: options)
        XCTAssertEqual(first.skippedBusy, ["Library/Caches/busy.bin"])
        XCTAssertEqual(first.removed.map(\.path), ["Library/Caches/idle.bin"])
        XCTAssertTrue(exists(root, "Library/Caches/busy.bin"))
        try writer.release()
        XCTAssertEqual(try Purge.run(containerAt: root, options: options).removed.map(\.path), ["Library/Caches/busy.bin"])
        XCTAssertFalse(try BackupPolicy.plan(containerAt: root).contains { $0.path == ".coordination" && $0.isIncluded }, "the lock directory is never backed up")
    }

    func testPurgeNeverRemovesAnItemWhileACoordinatedWriteOfItRuns() throws {
        let (c, _, root) = try makeContainer(self)
        try c.write(Array("busy".utf8), to: "tmp/busy.bin")
        c.close()
        // A coordinated write in progress on another thread, in the machine-wide domain purge uses by default.
        let coordinator = FileCoordinator(domain: try CoordinationDomain.machineWide())
        let inside = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? coordinator.coordinate(writingItemAt: URL(fileURLWithPath: root + "/tmp/busy.bin")) { _ in
                inside.signal()
                release.wait()
            }
            done.signal()
        }
        inside.wait()
        let report = try Purge.run(containerAt: root)
        XCTAssertEqual(report.skippedBusy, ["tmp/busy.bin"])
        XCTAssertTrue(exists(root, "tmp/busy.bin"))
        release.signal()
        done.wait()
        XCTAssertEqual(try Purge.run(containerAt: root).removed.map(\.path), ["tmp/busy.bin"])
    }

    func testAContainerClearsItsOwnTmpAtLaunchOnlyWhenNoOneElseHoldsIt() throws {
        let (first, keys, root) = try makeContainer(self)
        try first.write(Array("t".utf8), to: "tmp/t1")
        let second = try Container(at: root, keys: keys, options: .init(clearsTemporaryDirectory: true))
        XCTAssertTrue(exists(root, "tmp/t1"), "another holder was using tmp")
        XCTAssertFalse(try second.clearTemporaryDirectory())
        first.close()
        XCTAssertTrue(try second.clearTemporaryDirectory())
        XCTAssertFalse(exists(root, "tmp/t1"))
        try second.write(Array("t".utf8), to: "tmp/t2")
        second.close()
        let third = try Container(at: root, keys: keys, options: .init(clearsTemporaryDirectory: true))
        defer { third.close() }
        XCTAssertFalse(exists(root, "tmp/t2"))
        XCTAssertTrue(exists(root, "tmp/CACHEDIR.TAG"))
    }
}

/// A live process holding something (a container in use, a coordinated access) until released.
final class Holder {
    let process = Process()
    let input = Pipe()

    /// `container-hold <root>`: holds the container in use.
    convenience init(root: String) throws {
        try self.init(try builtProduct("container-hold"), [root], ready: "holding")
    }

    /// Starts `executable` and waits for its first output line to be `ready`.
    init(_ executable: String, _ arguments: [String], ready: String) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let out = Pipe()
        process.standardInput = input
        process.standardOutput = out
        try process.run()
        var line = Data()
        while let b = try out.fileHandleForReading.read(upToCount: 1), !b.isEmpty, b != Data("\n".utf8) { line += b }
        guard String(decoding: line, as: UTF8.self) == ready else {
            process.terminate()
            throw ProtectionError(.io(EIO), "\(executable) did not start: '\(String(decoding: line, as: UTF8.self))'")
        }
    }

    /// Closes its standard input and waits for it to exit.
    func release() throws {
        try input.fileHandleForWriting.close()
        process.waitUntilExit()
    }

    deinit { if process.isRunning { process.terminate() } }
}
