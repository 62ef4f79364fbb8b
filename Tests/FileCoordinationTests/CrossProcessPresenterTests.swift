// Presenters in other processes: asked to save before reads, to relinquish before writes, and never waited on past the deadline.
import FileCoordination
import Foundation
import XCTest

final class CrossProcessPresenterTests: XCTestCase {
    func testPresenterSavesBeforeAReaderReads() throws {
        let root = try makeScratchDirectory()
        let item = root.appendingPathComponent("doc.txt")
        try Data("stale".utf8).write(to: item)
        let presenter = try WorkerProcess(["present", "--root", root.path, "--item", "doc.txt"])
        presenter.expect("ready")
        let coordinator = FileCoordinator(domain: try CoordinationDomain(root: root), presenterDeadline: .seconds(5))
        let seen = try coordinator.coordinate(readingItemAt: item) { url in try String(contentsOf: url, encoding: .utf8) }
        XCTAssertEqual(seen, "saved-by-presenter", "the reader read before the presenter saved")
        presenter.expect("save")
        presenter.expect("relinquish-reader")
        presenter.expect("reacquire-reader")
        XCTAssertEqual(presenter.finish(), 0)
    }

    func testPresenterRelinquishesBeforeAWriterWritesAndHearsOfTheChange() throws {
        let root = try makeScratchDirectory()
        let item = root.appendingPathComponent("doc.txt")
        let marker = root.appendingPathComponent("doc.txt.relinquished")
        let presenter = try WorkerProcess(["present", "--root", root.path, "--item", "doc.txt"])
        presenter.expect("ready")
        let coordinator = FileCoordinator(domain: try CoordinationDomain(root: root), presenterDeadline: .seconds(5))
        let relinquishedDuringWrite = try coordinator.coordinate(writingItemAt: item) { url in
            try Data("new".utf8).write(to: url)
            return FileManager.default.fileExists(atPath: marker.path)
        }
        XCTAssertTrue(relinquishedDuringWrite, "the writer wrote before the presenter relinquished")
        presenter.expect("relinquish-writer")
        presenter.expect("reacquire-writer")
        presenter.expect("did-change")
        XCTAssertFalse(FileManager.default.fileExists(atPath: marker.path), "the presenter did not reacquire")
        XCTAssertEqual(presenter.finish(), 0)
    }

    func testPresenterHearsOfAMoveOfItsDirectory() throws {
        let root = try makeScratchDirectory()
        let folder = root.appendingPathComponent("folder")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let presenter = try WorkerProcess(["present", "--root", root.path, "--item", "folder/doc.txt"])
        presenter.expect("ready")
        let coordinator = FileCoordinator(domain: try CoordinationDomain(root: root), presenterDeadline: .seconds(5))
        let destination = root.appendingPathComponent("renamed")
        try coordinator.coordinate(writingItemAt: folder, options: .forMoving, writingItemAt: destination, options: .forReplacing) {
            source, target in
            try FileManager.default.moveItem(at: source, to: target)
            try coordinator.item(at: source, didMoveTo: target)
        }
        presenter.expect("relinquish-writer")
        XCTAssertEqual(presenter.expect("did-move"), "did-move " + destination.appendingPathComponent("doc.txt").path)
        XCTAssertEqual(presenter.finish(), 0)
    }

    func testSilentPresenterDelaysAWriterByAtMostTheDeadline() throws {
        let root = try makeScratchDirectory()
        let item = root.appendingPathComponent("doc.txt")
        let presenter = try WorkerProcess(["present", "--root", root.path, "--item", "doc.txt", "--hang"])
        presenter.expect("ready")
        let deadline = 0.3
        let coordinator = FileCoordinator(domain: try CoordinationDomain(root: root), presenterDeadline: .milliseconds(300))
        let start = Date()
        try coordinator.coordinate(writingItemAt: item) { url in try Data("x".utf8).write(to: url) }
        let elapsed = Date().timeIntervalSince(start)
        XCTAssertGreaterThanOrEqual(elapsed, deadline * 0.9, "the coordinator did not ask the presenter at all")
        XCTAssertLessThan(elapsed, deadline + 0.5, "a silent presenter held the writer for \(elapsed) s")
        // A merging write asks to save and then to relinquish: a presenter that missed the first
        // deadline is skipped for the second, so the delay stays one deadline, not two.
        let mergeStart = Date()
        try coordinator.coordinate(writingItemAt: item, options: .forMerging) { url in try Data("y".utf8).write(to: url) }
        let mergeElapsed = Date().timeIntervalSince(mergeStart)
        XCTAssertGreaterThanOrEqual(mergeElapsed, deadline * 0.9)
        XCTAssertLessThan(mergeElapsed, deadline * 2 - 0.05, "the silent presenter was waited on twice (\(mergeElapsed) s)")
        presenter.kill()
    }

    func testCrashedPresenterIsSkippedAndForgotten() throws {
        let root = try makeScratchDirectory()
        let item = root.appendingPathComponent("doc.txt")
        let presenter = try WorkerProcess(["present", "--root", root.path, "--item", "doc.txt"])
        presenter.expect("ready")
        presenter.kill()
        let coordinator = FileCoordinator(domain: try CoordinationDomain(root: root), presenterDeadline: .seconds(5))
        let start = Date()
        try coordinator.coordinate(writingItemAt: item) { url in try Data("x".utf8).write(to: url) }
        XCTAssertLessThan(Date().timeIntervalSince(start), 1, "a dead presenter must not be waited on")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(".coordination/presenters").path)
            .filter { $0.hasPrefix("\(presenter.process.processIdentifier)-") }
        XCTAssertEqual(leftovers, [], "the dead presenter's rendezvous files should be removed")
    }
}
