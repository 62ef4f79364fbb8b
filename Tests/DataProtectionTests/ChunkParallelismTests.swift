import Foundation
import DataProtection
// @testable: drives the internal chunk worker pool (ChunkParallelism) directly, with bodies that fail at chosen chunks.
@testable import DataProtectionFiles
import Locking
import XCTest

/// The chunk workers and the ordered stage, on real threads: every range runs once, the serial stage runs
/// front to back one call at a time, and errors stop the work and come back to the caller.
final class ChunkParallelismTests: XCTestCase {
    struct Stop: Error, Equatable { let at: Int }

    /// Body ranges are disjoint and cover `0..<n`; serial ranges are ascending, adjacent, cover `0..<n`, each
    /// after the body finished its chunks, and never overlap in time.
    func testOrderedStageCoversEverythingInOrder() throws {
        for n in [1, 2, 7, 8, 9, 64, 257] {
            for _ in 0..<50 {
                let done = Locked([Bool](repeating: false, count: n))
                let serialRanges = Locked<[Range<Int>]>([])
                let inSerial = Locked(0)
                try ChunkParallelism.forEachPart(count: n, chunkSize: 16384) { (r) throws(Stop) in
                    done.withLock { d in
                        for k in r { XCTAssertFalse(d[k], "chunk \(k) twice"); d[k] = true }
                    }
                } thenInOrder: { (r) throws(Stop) in
                    XCTAssertEqual(inSerial.withLock { $0 += 1; return $0 }, 1, "serial stage entered twice at once")
                    done.withLock { d in for k in r { XCTAssertTrue(d[k], "chunk \(k) written before it was sealed") } }
                    serialRanges.withLock { $0.append(r) }
                    inSerial.withLock { $0 -= 1 }
                }
                XCTAssertEqual(done.withLock { $0 }, [Bool](repeating: true, count: n))
                let ranges = serialRanges.withLock { $0 }
                XCTAssertEqual(ranges.first?.lowerBound, 0)
                XCTAssertEqual(ranges.last?.upperBound, n)
                for (a, b) in zip(ranges, ranges.dropFirst()) { XCTAssertEqual(a.upperBound, b.lowerBound) }
            }
        }
        guard ChunkParallelism.cores > 1 else { return }
        // A helper thread takes pieces: the first piece the calling thread runs waits (bounded) until another thread
        // has run one, so the check does not depend on how busy the machine is (a busy machine may let the caller
        // finish tiny pieces alone before a helper wakes).
        let caller = UInt(bitPattern: Int(bitPattern: pthread_self()))
        let others = Locked(0)
        try ChunkParallelism.forEachPart(count: 64, chunkSize: 16384) { (_) throws(Stop) in
            let me = UInt(bitPattern: Int(bitPattern: pthread_self()))
            if me != caller { others.withLock { $0 += 1 }; return }
            let limit = Date().addingTimeInterval(10)
            while others.withLock({ $0 }) == 0 && Date() < limit { usleep(1000) }
        } thenInOrder: { (_) throws(Stop) in }
        XCTAssertGreaterThan(others.withLock { $0 }, 0, "no piece ran on a helper thread")
    }

    /// A failing range: the caller gets its error, and the serial stage never passes it.
    func testBodyErrorStopsTheSerialStage() {
        for failing in [0, 3, 40, 63] {
            let written = Locked(0)
            do {
                try ChunkParallelism.forEachPart(count: 64, chunkSize: 16384) { (r) throws(Stop) in
                    if r.contains(failing) { throw Stop(at: failing) }
                } thenInOrder: { (r) throws(Stop) in
                    written.withLock { $0 = max($0, r.upperBound) }
                }
                XCTFail("the error was lost")
            } catch {
                XCTAssertEqual(error, Stop(at: failing))
            }
            XCTAssertLessThanOrEqual(written.withLock { $0 }, failing, "written past the failed range")
        }
    }

    /// A failing serial call (a write error): its error comes back and the stage makes no further call.
    func testSerialErrorIsReportedOnce() {
        for _ in 0..<100 {
            let calls = Locked(0)
            do {
                try ChunkParallelism.forEachPart(count: 64, chunkSize: 16384) { (_) throws(Stop) in
                } thenInOrder: { (r) throws(Stop) in
                    calls.withLock { $0 += 1 }
                    throw Stop(at: r.lowerBound)
                }
                XCTFail("the error was lost")
            } catch {
                XCTAssertEqual(error, Stop(at: 0))
            }
            XCTAssertEqual(calls.withLock { $0 }, 1)
        }
    }

    /// Callers on several threads at once: a busy helper is not waited for, and each call still covers its range.
    func testConcurrentCallers() {
        DispatchQueue.concurrentPerform(iterations: 4) { t in
            for round in 0..<200 {
                let n = 8 + (round + t) % 57
                let sum = Locked(0)
                try? ChunkParallelism.forEachPart(count: n, chunkSize: 16384) { (r) throws(Stop) in
                    sum.withLock { $0 += r.reduce(0, +) }
                }
                XCTAssertEqual(sum.withLock { $0 }, n * (n - 1) / 2)
            }
        }
    }
}
