import ArgumentParser
import DataProtection
import Foundation

/// `dpctl audit`: the guard against silent plaintext in containers.
struct AuditCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "List files left plaintext where a container's policy expects protection; exits 3 when it finds any.",
        discussion: """
            Checks Documents (with its Inbox), Library/Application Support and Library/Preferences: every regular \
            file there must be a protected file, whatever its name. A plaintext file, a symbolic link, a FIFO or \
            other special file, or a file with more than one hard link is listed with the command that fixes it \
            (`dpctl protect --class …`). Links are never followed and FIFOs never opened for reading. Needs no key: \
            it works while the domain is locked.
            """)
    @Flag(help: "Print the findings as JSON (path, kind, directory, class, fix).") var json = false
    @Argument(help: "Container roots.") var containers: [String]

    func run() throws {
        var findings: [AuditFinding] = []
        for c in containers { findings += try ContainerAudit.run(containerAt: c) }
        if json {
            let rows: [[String: String]] = findings.map {
                ["container": $0.root, "path": $0.path, "kind": $0.kind.rawValue, "directory": $0.directory.relativePath, "class": $0.expectedClass.name, "fix": $0.fix]
            }
            print(String(decoding: try JSONSerialization.data(withJSONObject: rows, options: [.prettyPrinted, .sortedKeys]), as: UTF8.self))
        } else {
            for f in findings { print("\(f.kind.rawValue.padding(toLength: 13, withPad: " ", startingAt: 0)) \(f.root)/\(f.path)\n    fix: \(f.fix)") }
            if findings.isEmpty { print("ok: no plaintext where the policy expects protection") }
        }
        if !findings.isEmpty {
            throw CLIError(exit: .auditFindings, message: "\(findings.count) item\(findings.count == 1 ? "" : "s") not protected where the container's policy expects protection", hint: "run the fix printed under each item, then `dpctl audit` again")
        }
    }
}
