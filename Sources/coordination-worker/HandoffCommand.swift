// handoff: measures how long a write lock takes to pass from one process to another.
import FileCoordination
import Foundation

/// `handoff --rounds N --hold-us U --record FILE`: loops coordinated writes of --item.
///
/// Every accessor reads the shared record (owner pid, release time), and when the previous owner
/// was another process, counts now − release time as one handoff. Just before returning, it
/// writes its own pid and the time. Two of these run side by side; each prints its latencies.
enum HandoffCommand {
    static func run(_ arguments: WorkerArguments) throws -> Int32 {
        let coordinator = FileCoordinator(domain: try arguments.domain(), timeout: .seconds(30))
        let item = try arguments.item()
        let record = try arguments.string("record")
        let rounds = try arguments.int("rounds")
        let hold = UInt32(try arguments.int("hold-us", default: 20))
        let me = getpid()
        var latencies: [UInt64] = []
        _ = readLine()  // start together
        for _ in 0..<rounds {
            try coordinator.coordinate(writingItemAt: item) { _ in
                let now = monotonicMicroseconds()
                if let text = try? String(contentsOfFile: record, encoding: .utf8) {
                    let fields = text.split(separator: " ")
                    if fields.count == 2, let owner = Int32(fields[0]), let released = UInt64(fields[1]), owner != me, now >= released {
                        latencies.append(now - released)
                    }
                }
                usleep(hold)
                try "\(me) \(monotonicMicroseconds())".write(toFile: record, atomically: false, encoding: .utf8)
            }
        }
        say("handoffs " + latencies.map(String.init).joined(separator: " "))
        return 0
    }
}
