// service-worker HOME DEVICES WORK
//
// Runs a ServiceGroup of two services: a writer that does protected writes in a loop through the async forms (a
// whole-file write of `WORK/w-<i>`, then an append and sync on the journaled handle `WORK/log`, which the writer never
// closes), and the domain's DataProtectionService. SIGTERM shuts the group down gracefully; the domain's service goes
// first, so the writer is still writing while its keys are retired. On standard output, one line per acknowledged step:
//   `W <i>`        `WORK/w-<i>` was written (its contents: `contents(i)`),
//   `J <n>`        the log holds n records, committed (`record(k)` for k in 0..<n),
//   `R <code>`     the next write was refused (once, then the writer stops),
//   `shutdown-complete` once the group has returned; then the process waits for standard input to close and exits 0.
// ServiceLifecycleTests (DpctlTests) reads its memory between `shutdown-complete` and its exit.
import DataProtection
import DataProtectionService
import Foundation
import Logging
import ServiceLifecycle

/// The writer: protected writes in a loop until the domain refuses them.
struct Writer: Service {
    let domain: ProtectionDomain
    let work: String

    func run() async throws {
        let log = try await domain.files.nonblocking.create("\(work)/log", protection: .complete)
        // Never closed by the writer (kept until the process exits): only the service's shutdown can wipe its keys.
        keptOpen = log
        try await log.nonblocking.sync()
        var records = 0
        for i in 0... {
            do {
                try await domain.files.nonblocking.write(contents(i), to: "\(work)/w-\(i)", protection: .complete)
                say("W \(i)")
                try await log.nonblocking.append(record(records))
                try await log.nonblocking.sync()
                records += 1
                say("J \(records)")
            } catch let e as ProtectionError {
                say("R \(e.code == .shuttingDown ? "shuttingDown" : "\(e)")")
                // A service returns when the group tells it to: the domain's service is still shutting down.
                try? await gracefulShutdown()
                return
            }
        }
    }
}

/// The log handle, left open on purpose: the memory scan checks that the shutdown wiped its keys, not the writer.
nonisolated(unsafe) var keptOpen: ProtectedFileHandle?

/// The contents of `w-<i>`: 20 KiB naming i (more than one 16 KiB chunk).
func contents(_ i: Int) -> [UInt8] { Array(String(repeating: "write \(i);", count: 20_480 / 8).utf8.prefix(20_480)) }

/// Log record k: 64 bytes naming k.
func record(_ k: Int) -> [UInt8] { Array("record \(k)".padding(toLength: 63, withPad: ".", startingAt: 0).utf8) + [10] }

func say(_ line: String) {
    print(line)
    fflush(nil)
}

let args = CommandLine.arguments
guard args.count == 4 else {
    FileHandle.standardError.write(Data("usage: service-worker HOME DEVICES WORK\n".utf8))
    exit(64)
}
/// The rig's logger, global so that it stays reachable until exit: copies of it live in the lifecycle's tasks, and
/// LeakSanitizer reported its storage as leaked at exit when it was a local of this main.
let logger: Logger = {
    var l = Logger(label: "service-worker")
    l.logLevel = .warning
    return l
}()
do {
    // One logger for the domain and its service (the service logs through the domain's).
    let domain = try ProtectionDomain.open(
        at: DomainLocation(home: args[1], deviceDirectory: args[2]), keyStore: .kernel(.session), logger: logger)
    let service = DataProtectionService(domain: domain)
    // The domain's service last: a group shuts its services down in reverse order, so it goes first.
    let group = ServiceGroup(configuration: .init(
        services: [.init(service: Writer(domain: domain, work: args[3])), .init(service: service)],
        gracefulShutdownSignals: [.sigterm], logger: logger))
    try await group.run()
    say("shutdown-complete")
    while readLine() != nil {}
    withExtendedLifetime((domain, keptOpen)) {}
} catch {
    say("FAILED \(error)")
    exit(70)
}
