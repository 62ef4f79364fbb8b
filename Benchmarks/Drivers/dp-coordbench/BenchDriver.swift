// Drivers for the cross-process figures of BENCHMARKS.md: handoff latency and contended throughput.
import Foundation

/// `bench-handoff --root DIR --rounds N`: two `handoff` processes pass one write lock back and forth.
///
/// Prints the median, p90 and p99 of release→acquire latency over the handoffs where the lock
/// changed hands, measured with CLOCK_MONOTONIC, which all processes share.
enum BenchDriver {
    static func handoff(_ options: Options) throws -> Int32 {
        let root = try options.string("root")
        let record = root + "/handoff.record"
        try? FileManager.default.removeItem(atPath: record)
        let rounds = String(try options.int("rounds", default: 2000))
        let bare = options.flag("bare") ? ["--bare"] : []
        let peers = try (0..<2).map { _ in
            try Child(["handoff", "--root", root, "--item", "baton", "--record", record, "--rounds", rounds, "--hold-us", "20"] + bare)
        }
        for peer in peers { peer.send("go") }
        var latencies: [UInt64] = []
        for peer in peers {
            let line = peer.readAll()
            for field in line.split(separator: " ").dropFirst() { if let value = UInt64(field) { latencies.append(value) } }
            guard peer.wait() == 0 else { throw BenchError(description: "a handoff peer failed") }
        }
        latencies.sort()
        guard !latencies.isEmpty else { throw BenchError(description: "no handoffs happened") }
        func percentile(_ p: Double) -> UInt64 { latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
        say("handoffs \(latencies.count) p50-us \(percentile(0.5)) p90-us \(percentile(0.9)) p99-us \(percentile(0.99))")
        return 0
    }

    /// `bench-contention --root DIR --readers K --writers M --duration-ms D`: K+M `loop` processes on one item.
    ///
    /// Prints reads/s, writes/s and their sum across all processes.
    static func contention(_ options: Options) throws -> Int32 {
        let root = try options.string("root")
        let duration = try options.int("duration-ms", default: 2000)
        var children: [(mode: String, child: Child)] = []
        for (mode, count) in [("read", try options.int("readers")), ("write", try options.int("writers"))] {
            for _ in 0..<count {
                children.append((mode, try Child(["loop", "--root", root, "--item", "contended", "--mode", mode, "--duration-ms", String(duration)])))
            }
        }
        for (_, child) in children { child.send("go") }
        var totals: [String: Int] = ["read": 0, "write": 0]
        for (mode, child) in children {
            let count = child.readAll().split(separator: " ").last.flatMap { Int($0) } ?? 0
            guard child.wait() == 0 else { throw BenchError(description: "a loop process failed") }
            totals[mode, default: 0] += count
        }
        let seconds = Double(duration) / 1000
        let reads = Int(Double(totals["read"]!) / seconds)
        let writes = Int(Double(totals["write"]!) / seconds)
        say("readers \(try options.int("readers")) writers \(try options.int("writers")) reads-per-s \(reads) writes-per-s \(writes) total-per-s \(reads + writes)")
        return 0
    }
}

/// This same executable run as a child with pipes.
final class Child {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()

    init(_ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        if let path = Bundle.main.executablePath { process.executableURL = URL(fileURLWithPath: path) }
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        try process.run()
    }

    func send(_ line: String) { input.fileHandleForWriting.write(Data((line + "\n").utf8)) }

    /// Everything the child prints, trimmed.
    func readAll() -> String {
        String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func wait() -> Int32 {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
        return process.terminationStatus
    }
}
