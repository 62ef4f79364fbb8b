// Real processes, real OFD locks: exclusion, starvation, crash release and deadlock freedom.
import FileCoordination
import Foundation
import XCTest

final class CrossProcessExclusionTests: XCTestCase {
    /// Runs stress workers (mode, items) together and returns (exit codes, log text).
    private func stress(
        root: URL, all: [String], workers: [(mode: String, items: [String])], iterations: Int, holdUS: Int, bare: Bool = false
    ) throws -> (codes: [Int32], log: String) {
        let log = root.appendingPathComponent("stress.log").path
        let board = root.appendingPathComponent("stress.board").path
        var processes: [WorkerProcess] = []
        for worker in workers {
            var arguments = [
                "stress", "--root", root.path, "--items", worker.items.joined(separator: ","), "--all", all.joined(separator: ","),
                "--mode", worker.mode, "--iterations", String(iterations), "--log", log, "--scoreboard", board,
                "--hold-us", String(holdUS),
            ]
            if bare { arguments.append("--bare") }
            processes.append(try WorkerProcess(arguments))
        }
        let codes = processes.map { $0.finish() }
        return (codes, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
    }

    func testReadersAndWritersOfOneItemNeverOverlap() throws {
        let root = try makeScratchDirectory()
        let workers = [("write", ["item"]), ("write", ["item"]), ("read", ["item"]), ("read", ["item"]), ("read", ["item"])]
        let (codes, log) = try stress(root: root, all: ["item"], workers: workers, iterations: 150, holdUS: 200)
        XCTAssertEqual(codes, [0, 0, 0, 0, 0], "a worker saw a conflicting access on the scoreboard or a half-written file")
        XCTAssertEqual(log.split(separator: "\n").count, 5 * 150 * 2)
        XCTAssertEqual(conflictsInLog(log), [])
        XCTAssertGreaterThanOrEqual(maximumConcurrent("read", in: log), 2, "readers should share the item")
    }

    func testUncoordinatedControlIsCaught() throws {
        // The same workload without coordination must be caught, or the checks above prove nothing.
        let root = try makeScratchDirectory()
        let workers = [("write", ["item"]), ("write", ["item"]), ("read", ["item"]), ("read", ["item"])]
        let (codes, log) = try stress(root: root, all: ["item"], workers: workers, iterations: 100, holdUS: 300, bare: true)
        XCTAssertTrue(codes.contains { $0 != 0 } || !conflictsInLog(log).isEmpty, "uncoordinated access went unnoticed")
    }

    func testDirectoryMoveExcludesReadersAndWritersInsideIt() throws {
        let root = try makeScratchDirectory()
        try FileManager.default.createDirectory(at: root.appendingPathComponent("d"), withIntermediateDirectories: true)
        let all = ["d", "d/a", "d/b"]
        let workers = [
            ("move", ["d"]), ("move", ["d"]), ("read", ["d/a", "d/b"]), ("read", ["d/b", "d/a"]), ("write", ["d/a", "d/b"]),
        ]
        let (codes, log) = try stress(root: root, all: all, workers: workers, iterations: 120, holdUS: 200)
        XCTAssertEqual(codes, [0, 0, 0, 0, 0], "a worker saw the directory half-moved or a conflicting access")
        XCTAssertEqual(conflictsInLog(log), [])
        XCTAssertTrue(FileManager.default.fileExists(atPath: root.appendingPathComponent("d").path))
    }

    func testWriterIsNotStarvedByAStreamOfReaders() throws {
        let root = try makeScratchDirectory()
        // Three readers, each holding 4 ms, overlap so that the item is never free of readers.
        let readers = try (0..<3).map { _ in
            try WorkerProcess(["readers", "--root", root.path, "--item", "item", "--hold-us", "4000"])
        }
        for reader in readers { reader.expect("reading") }
        let writer = try WorkerProcess(["wait-write", "--root", root.path, "--item", "item"])
        let waited = writer.expect("waited-us").split(separator: " ").last.flatMap { Int($0) } ?? -1
        XCTAssertEqual(writer.finish(), 0)
        let counts = readers.map { reader -> Int in
            reader.closeInput()
            let count = reader.expect("reads").split(separator: " ").last.flatMap { Int($0) } ?? 0
            reader.finish()
            return count
        }
        print("writer waited \(waited) µs behind readers (reads: \(counts))")
        XCTAssertGreaterThanOrEqual(waited, 0)
        // Bounded by the longest reader in flight (4 ms) plus wake-ups, far below the 30 s timeout.
        XCTAssertLessThan(waited, 500_000, "the writer waited \(waited) µs: readers starved it")
        XCTAssertTrue(counts.allSatisfy { $0 > 0 })
    }

    func testKilledHolderReleasesItsLocks() throws {
        let root = try makeScratchDirectory()
        let domain = try CoordinationDomain(root: root)
        let item = root.appendingPathComponent("item")
        let holder = try WorkerProcess(["hold", "--root", root.path, "--item", "item", "--mode", "write"])
        holder.expect("held")
        let impatient = FileCoordinator(domain: domain, timeout: .milliseconds(150))
        XCTAssertThrowsError(try impatient.coordinate(readingItemAt: item) { _ in }) { error in
            XCTAssertEqual((error as? CoordinationError)?.code, .timedOut)
        }
        holder.kill()
        XCTAssertEqual(holder.process.terminationReason, .uncaughtSignal)
        let patient = FileCoordinator(domain: domain, timeout: .seconds(5))
        let start = Date()
        try patient.coordinate(writingItemAt: item) { _ in }
        XCTAssertLessThan(Date().timeIntervalSince(start), 1, "the kernel should drop a dead process's locks at once")
    }

    func testCrossedMultiItemWritesDoNotDeadlock() throws {
        let root = try makeScratchDirectory()
        let workers = try (0..<6).map { index in
            try WorkerProcess([
                "multi", "--root", root.path, "--a", "a", "--b", "b", "--order", index % 2 == 0 ? "ab" : "ba", "--iterations", "150",
            ])
        }
        let codes = workers.map { $0.finish() }
        XCTAssertEqual(codes, [0, 0, 0, 0, 0, 0], "a crossed A/B writer failed (a deadlock would end in .timedOut)")
    }
}
