// notes-service --state DIR [--host 127.0.0.1] [--port 8080] [--max-body BYTES]
//
// An HTTP service that keeps each user's notes and uploads in a protected container, one protection domain per user
// (Examples/NotesService/README.md). Users are the directories `STATE/users/<user>` whose `domain/` `dpctl init` made;
// `dpctl unlock` / `dpctl lock` from outside decide, per user, whether their data is available:
// - while a user's domain is locked, their notes answer `423 Locked` with what to run; uploads are still accepted into
//   the Inbox, and the worker processes them into Documents after the unlock;
// - SIGTERM or SIGINT shuts down gracefully: the server stops accepting and finishes the requests in flight, the
//   worker stops, and each domain's DataProtectionService closes its container and wipes its keys.
// Standard output says "listening on http://HOST:PORT" once it serves, and "stopped" at the end (exit 0).
import DataProtection
import DataProtectionService
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle

let options = Options.parse(Array(CommandLine.arguments.dropFirst()))
/// Global, so it stays reachable until exit (copies live in the lifecycle's tasks).
let logger: Logger = {
    var l = Logger(label: "notes-service")
    l.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
    return l
}()

/// The users under `STATE/users`: each directory whose `domain/keybag` exists (a domain `dpctl init` made).
func userNames(in state: String) -> [String] {
    let fm = FileManager.default
    let names = (try? fm.contentsOfDirectory(atPath: state + "/users")) ?? []
    return names.filter { !$0.hasPrefix(".") && fm.fileExists(atPath: "\(state)/users/\($0)/domain/keybag") }.sorted()
}

do {
    let environment = ProcessInfo.processInfo.environment
    let keyStore = KeyStore.kernel(try KeyringParent.from(environment: environment))
    let names = userNames(in: options.state)
    guard !names.isEmpty else {
        FileHandle.standardError.write(Data("""
            notes-service: error: no users under '\(options.state)/users'; create one with \
            `DATAPROTECTION_HOME=\(options.state)/users/NAME/domain DATAPROTECTION_DEVICE_DIR=\(options.state)/devices dpctl init`

            """.utf8))
        exit(66)
    }
    var users: [String: UserSpace] = [:]
    for name in names { users[name] = try UserSpace.open(name, state: options.state, keyStore: keyStore, logger: logger) }
    let queue = UploadQueue()
    let host = options.host
    // A ServiceGroup stops its services in reverse order, and Application puts its server after these: at SIGTERM the
    // server stops first (no new connections; requests in flight finish), then the worker, then the domains.
    let services: [any Service] = names.map { users[$0]!.service } + [InboxWorker(users: users, queue: queue, logger: logger)]
    let app = Application(
        router: makeRouter(users: users, queue: queue, maxBody: options.maxBody),
        configuration: .init(address: .hostname(host, port: options.port), serverName: "notes-service"),
        services: services,
        onServerRunning: { channel in say("notes-service: listening on http://\(host):\(channel.localAddress?.port ?? 0)") },
        logger: logger)
    try await app.runService(gracefulShutdownSignals: [.sigterm, .sigint])
    say("notes-service: stopped")
} catch {
    FileHandle.standardError.write(Data("notes-service: error: \(error)\n".utf8))
    exit(70)
}
