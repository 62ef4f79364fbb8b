import FileCoordination
import Foundation
import DataProtection
import Synchronization
import XCTest

/// Whole-file reads and writes of protected files take part in file coordination.
final class CoordinatedFilesTests: XCTestCase {
    func testReadWaitsForACoordinatedWriterAndWriteWaitsForAReader() throws {
        let dir = try temporaryDirectory(self)
        let domain = try CoordinationDomain(root: URL(fileURLWithPath: dir))
        let keys = try InMemoryClassKeys.random()
        let files = ProtectedFiles(keys: keys, coordinator: FileCoordinator(domain: domain))
        let path = "\(dir)/doc"
        try files.write([1, 2, 3], to: path, protection: .complete)

        // Another coordinator (as another process would) holds a write of the file.
        let other = FileCoordinator(domain: domain)
        let holding = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let readDone = Atomic<Bool>(false)
        Thread.detachNewThread {
            try? other.coordinate(writingItemAt: URL(fileURLWithPath: path), options: .forReplacing) { _ in
                holding.signal()
                release.wait()
            }
        }
        holding.wait()
        let reader = Thread { _ = try? files.read(path); readDone.store(true, ordering: .relaxed) }
        reader.start()
        // While the writer holds the item the read cannot finish (checked over a bounded interval).
        let until = Date().addingTimeInterval(0.3)
        while Date() < until { XCTAssertFalse(readDone.load(ordering: .relaxed), "a read finished while a coordinated writer held the file"); usleep(5_000) }
        release.signal()
        let limit = Date().addingTimeInterval(10)
        while !readDone.load(ordering: .relaxed) && Date() < limit { usleep(1_000) }
        XCTAssertTrue(readDone.load(ordering: .relaxed), "the read did not resume after the writer finished")

        // And a whole-file write waits for a coordinated reader.
        let holdingRead = DispatchSemaphore(value: 0), releaseRead = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? other.coordinate(readingItemAt: URL(fileURLWithPath: path)) { _ in
                holdingRead.signal()
                releaseRead.wait()
            }
        }
        holdingRead.wait()
        let wrote = Atomic<Bool>(false)
        Thread.detachNewThread { try? files.write([9], to: path, protection: .complete); wrote.store(true, ordering: .relaxed) }
        let until2 = Date().addingTimeInterval(0.3)
        while Date() < until2 { XCTAssertFalse(wrote.load(ordering: .relaxed), "a replace finished while a coordinated reader held the file"); usleep(5_000) }
        releaseRead.signal()
        while !wrote.load(ordering: .relaxed) && Date() < limit { usleep(1_000) }
        XCTAssertEqual(try files.read(path), [9])
    }
}
