// The worker's commands: each one a real process doing coordinated accesses the way an app would.
import FileCoordination
import Foundation
import Synchronization

/// Dispatches a parsed command line.
enum WorkerCommand {
    static func run(_ arguments: WorkerArguments) throws -> Int32 {
        switch arguments.command {
        case "hold": return try hold(arguments)
        case "stress": return try StressCommand(arguments).run()
        case "multi": return try multi(arguments)
        case "readers": return try readers(arguments)
        case "wait-write": return try waitWrite(arguments)
        case "present": return try PresentCommand.run(arguments)
        default: throw WorkerError(description: "unknown command '\(arguments.command)'")
        }
    }

    /// hold --mode read|write|move: takes the item, prints "held", keeps it until stdin closes.
    static func hold(_ arguments: WorkerArguments) throws -> Int32 {
        let coordinator = FileCoordinator(domain: try arguments.domain(), timeout: .seconds(30))
        let item = try arguments.item()
        let body: (URL) throws -> Void = { _ in
            say("held")
            _ = readLine()
        }
        switch try arguments.string("mode") {
        case "read": try coordinator.coordinate(readingItemAt: item, byAccessor: body)
        case "write": try coordinator.coordinate(writingItemAt: item, byAccessor: body)
        case "move": try coordinator.coordinate(writingItemAt: item, options: .forMoving, byAccessor: body)
        default: throw WorkerError(description: "--mode must be read, write or move")
        }
        say("released")
        return 0
    }

    /// multi --a A --b B --order ab|ba --iterations N: writes both items together, N times.
    static func multi(_ arguments: WorkerArguments) throws -> Int32 {
        let coordinator = FileCoordinator(domain: try arguments.domain(), timeout: .seconds(30))
        var first = try arguments.item("a")
        var second = try arguments.item("b")
        if try arguments.string("order") == "ba" { swap(&first, &second) }
        for _ in 0..<(try arguments.int("iterations")) {
            try coordinator.coordinate(writingItemAt: first, writingItemAt: second) { a, b in
                try Data("x".utf8).write(to: a)
                try Data("y".utf8).write(to: b)
            }
        }
        say("done")
        return 0
    }

    /// readers --hold-us U: reads the item in a loop, each read held U µs, until stdin closes; prints the count.
    static func readers(_ arguments: WorkerArguments) throws -> Int32 {
        let coordinator = FileCoordinator(domain: try arguments.domain(), timeout: .seconds(30))
        let item = try arguments.item()
        let hold = UInt32(try arguments.int("hold-us"))
        let stop = stopWhenStdinCloses()
        var count = 0
        say("reading")
        while !stop.isStopped {
            try coordinator.coordinate(readingItemAt: item) { _ in _ = usleep(hold) }
            count += 1
        }
        say("reads \(count)")
        return 0
    }

    /// wait-write: one write; prints how many microseconds it waited for the lock.
    static func waitWrite(_ arguments: WorkerArguments) throws -> Int32 {
        let coordinator = FileCoordinator(domain: try arguments.domain(), timeout: .seconds(30))
        let start = monotonicMicroseconds()
        let waited = try coordinator.coordinate(writingItemAt: try arguments.item()) { _ in
            monotonicMicroseconds() - start
        }
        say("waited-us \(waited)")
        return 0
    }
}

/// Prints one line to stdout and flushes it, so the parent sees it at once.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// CLOCK_MONOTONIC in microseconds, comparable between processes.
func monotonicMicroseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
}

/// A flag set by a background thread when stdin reaches end of file.
func stopWhenStdinCloses() -> StopFlag {
    let flag = StopFlag()
    Thread.detachNewThread {
        while readLine() != nil {}
        flag.stop()
    }
    return flag
}

/// A flag threads share to say "stop".
final class StopFlag: Sendable {
    private let value = Atomic<Bool>(false)
    func stop() { value.store(true, ordering: .relaxed) }
    var isStopped: Bool { value.load(ordering: .relaxed) }
}
