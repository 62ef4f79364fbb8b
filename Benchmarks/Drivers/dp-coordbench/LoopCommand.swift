// loop: one peer of `bench-contention`.
import FileCoordination
import Foundation

/// `loop --root DIR --item NAME --mode read|write --duration-ms D`: as many coordinations as fit in D ms after the
/// driver's start line; prints the count.
enum LoopCommand {
    static func run(_ options: Options) throws -> Int32 {
        let coordinator = FileCoordinator(domain: try options.domain(), timeout: .seconds(30))
        let item = try options.item()
        let reading = try options.string("mode") == "read"
        _ = readLine()  // start together: the driver writes a line to every peer
        let end = monotonicMicroseconds() + UInt64(try options.int("duration-ms")) * 1000
        var count = 0
        while monotonicMicroseconds() < end {
            if reading {
                try coordinator.coordinate(readingItemAt: item) { _ in }
            } else {
                try coordinator.coordinate(writingItemAt: item) { _ in }
            }
            count += 1
        }
        say("count \(count)")
        return 0
    }
}
