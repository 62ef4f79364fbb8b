// handoff: measures how long a write lock takes to pass from one process to another.
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
    static func run(_ options: Options) throws -> Int32 {
        let coordinator = FileCoordinator(domain: try options.domain(), timeout: .seconds(30))
        let item = try options.item()
        let record = try options.string("record")
        let rounds = try options.int("rounds")
        let hold = UInt32(try options.int("hold-us", default: 20))
        let me = getpid()
        var latencies: [UInt64] = []
        // The record is 16 bytes (owner pid, release time) read and written with pread/pwrite, so
        // measuring costs about a microsecond, not a Foundation file round trip.
        let recordFD = open(record, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        let bareFD = open(item.path + ".bare-lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        let access: (() throws -> Void) throws -> Void = { body in
            if options.flag("bare") {
                ofdLock(bareFD, wait: true, type: F_WRLCK)
                defer { ofdLock(bareFD, wait: false, type: F_UNLCK) }
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
                guard pwrite(recordFD, &mine, 16, 0) == 16 else { throw BenchError(description: "cannot write \(record)") }
            }
        }
        say("handoffs " + latencies.map(String.init).joined(separator: " "))
        return 0
    }
}

/// One byte's open-file-description lock, taken (`wait`: F_OFD_SETLKW) or released, as FileCoordination locks.
private func ofdLock(_ fd: Int32, wait: Bool, type: Int32) {
    // F_OFD_SETLK / F_OFD_SETLKW from <fcntl.h> (Linux 3.15); Glibc's module map leaves them out.
    let command: Int32 = wait ? 38 : 37
    var lock = flock()
    lock.l_type = Int16(type)
    lock.l_whence = Int16(SEEK_SET)
    lock.l_start = 0
    lock.l_len = 1
    _ = fcntl(fd, command, &lock)
}
