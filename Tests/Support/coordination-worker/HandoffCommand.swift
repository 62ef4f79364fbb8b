// handoff: measures how long a write lock takes to pass from one process to another.
internal import CShims
import FileCoordination
import Foundation

/// `handoff --rounds N --hold-us U --record FILE`: loops coordinated writes of --item.
///
/// Every accessor reads the shared record (owner pid, release time), and when the previous owner
/// was another process, counts now − release time as one handoff. Just before returning, it
/// writes its own pid and the time. Two of these run side by side; each prints its latencies.
/// With `--bare` the same loop uses one raw `F_OFD_SETLKW` write lock instead of a coordinator:
/// the floor that the kernel and the VM's wake-up set.
enum HandoffCommand {
    static func run(_ arguments: WorkerArguments) throws -> Int32 {
        let coordinator = FileCoordinator(domain: try arguments.domain(), timeout: .seconds(30))
        let item = try arguments.item()
        let record = try arguments.string("record")
        let rounds = try arguments.int("rounds")
        let hold = UInt32(try arguments.int("hold-us", default: 20))
        let me = getpid()
        var latencies: [UInt64] = []
        // The record is 16 bytes (owner pid, release time) read and written with pread/pwrite, so
        // measuring costs about a microsecond, not a Foundation file round trip.
        let recordFD = open(record, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        let bareFD = open(item.path + ".bare-lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        let access: (() throws -> Void) throws -> Void = { body in
            if arguments.flag("bare") {
                _ = dp_fcntl_lock(bareFD, dp_F_OFD_SETLKW, Int16(F_WRLCK), Int16(SEEK_SET), 0, 1, nil)
                defer { _ = dp_fcntl_lock(bareFD, dp_F_OFD_SETLK, Int16(F_UNLCK), Int16(SEEK_SET), 0, 1, nil) }
                try body()
            } else {
                try coordinator.coordinate(writingItemAt: item) { _ in try body() }
            }
        }
        _ = readLine()  // start together
        for _ in 0..<rounds {
            try access {
                let now = monotonicMicroseconds()
                var previous: (owner: Int64, released: Int64) = (0, 0)
                if pread(recordFD, &previous, 16, 0) == 16, previous.owner != Int64(me), now >= UInt64(previous.released),
                    previous.owner != 0
                {
                    latencies.append(now - UInt64(previous.released))
                }
                usleep(hold)
                var mine: (owner: Int64, released: Int64) = (Int64(me), Int64(monotonicMicroseconds()))
                guard pwrite(recordFD, &mine, 16, 0) == 16 else { throw WorkerError(description: "cannot write \(record)") }
            }
        }
        say("handoffs " + latencies.map(String.init).joined(separator: " "))
        return 0
    }
}
