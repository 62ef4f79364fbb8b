import ArgumentParser
import DataProtection

/// `dpctl purge`: delete the purgeable contents (tmp, Caches) of containers.
struct PurgeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "purge",
        abstract: "Delete what containers hold in tmp and Library/Caches, oldest first.",
        discussion: """
            A container that a running process holds open is skipped (or waited for, with --wait); \
            a file still open for writing is left. CACHEDIR.TAG files are kept.
            """)
    @Option(name: .customLong("until-free"), help: ArgumentHelp("Stop once the filesystem has more than this free (e.g. 500M, 2G).", valueName: "size"))
    var untilFree: String?
    @Flag(help: "Wait for containers in use instead of skipping them.") var wait = false
    @Argument(help: "Container roots.") var containers: [String]

    func run() throws {
        var target = PurgeOptions.Target.all
        if let untilFree {
            guard let bytes = Self.parseSize(untilFree) else {
                throw ValidationError("'\(untilFree)' is not a size: use bytes or a suffix K, M, G, T (e.g. 500M)")
            }
            target = .untilFreeBytes(bytes)
        }
        for c in containers {
            let r = try Purge.run(containerAt: c, options: PurgeOptions(target: target, waitIfInUse: wait))
            if r.skippedInUse {
                print("\(c): in use by a running process; skipped (use --wait to wait for it)")
                continue
            }
            print("\(c): removed \(r.removed.count) items, \(r.freedBytes) bytes; \(r.freeBytesAfter) bytes free")
            for p in r.skippedBusy { print("\(c): left '\(p)': it is open for writing") }
        }
    }

    /// Bytes from "123", "4K", "5M", "6G", "7T" (powers of 1024).
    static func parseSize(_ s: String) -> Int64? {
        let units: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
        let upper = s.uppercased()
        if let last = upper.last, let unit = units[last] {
            return Int64(upper.dropLast()).flatMap { $0.multipliedReportingOverflow(by: unit).overflow ? nil : $0 * unit }
        }
        return Int64(upper)
    }
}
