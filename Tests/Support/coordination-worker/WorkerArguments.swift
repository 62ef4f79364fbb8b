// Parses `command --key value ...` arguments of the worker.
import FileCoordination
import Foundation

/// Why the worker could not run.
struct WorkerError: Error, CustomStringConvertible {
    let description: String
}

/// The worker's command and its `--key value` options.
struct WorkerArguments {
    let command: String
    private var values: [String: String] = [:]
    private var flags: Set<String> = []

    init(_ arguments: ArraySlice<String>) throws {
        guard let command = arguments.first else { throw WorkerError(description: "missing command") }
        self.command = command
        var rest = arguments.dropFirst()
        while let key = rest.popFirst() {
            guard key.hasPrefix("--") else { throw WorkerError(description: "unexpected argument '\(key)'") }
            let name = String(key.dropFirst(2))
            if let next = rest.first, !next.hasPrefix("--") {
                values[name] = next
                rest.removeFirst()
            } else {
                flags.insert(name)
            }
        }
    }

    func string(_ name: String) throws -> String {
        guard let value = values[name] else { throw WorkerError(description: "missing --\(name)") }
        return value
    }

    func int(_ name: String, default fallback: Int? = nil) throws -> Int {
        guard let text = values[name] else {
            if let fallback { return fallback }
            throw WorkerError(description: "missing --\(name)")
        }
        guard let value = Int(text) else { throw WorkerError(description: "--\(name) needs an integer, not '\(text)'") }
        return value
    }

    func flag(_ name: String) -> Bool { flags.contains(name) }

    /// The domain named by --root (and --locks, if given).
    func domain() throws -> CoordinationDomain {
        let root = URL(fileURLWithPath: try string("root"))
        let locks = values["locks"].map { URL(fileURLWithPath: $0) }
        return try CoordinationDomain(root: root, lockDirectory: locks)
    }

    /// An item path under --root.
    func item(_ name: String = "item") throws -> URL {
        URL(fileURLWithPath: try string("root")).appendingPathComponent(try string(name))
    }
}
