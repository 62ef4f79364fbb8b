import ArgumentParser
import DataProtection
import Foundation

/// `dpctl doctor`: whether the kernel keyring is there, this uid's key quota, and what N more unlocked domains need.
struct Doctor: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check the kernel keyring and this uid's key quota; say which sysctl to raise, and to what, for N more unlocked domains.",
        discussion: """
            Each unlocked domain takes one kernel key of this uid's quota (two with `unlock --timeout`). The quota is \
            kernel.keys.maxkeys and kernel.keys.maxbytes (root: root_maxkeys, root_maxbytes); usage is read from \
            /proc/key-users. Exits 0 when N more domains fit, 74 when they do not (the message gives the sysctl \
            commands), 69 when the keyring is refused.
            """)
    @Option(name: .long, help: ArgumentHelp("How many more domains this uid should be able to hold unlocked.", valueName: "n"))
    var domains: Int = 1
    @Flag(name: .long, help: "Count them as unlocked with --timeout (two keys each).")
    var timeout = false
    @Flag(help: "Print JSON for scripts.") var json = false

    func run() throws {
        guard domains >= 0 else { throw CLIError(exit: .usage, message: "--domains must be 0 or more", hint: nil) }
        try KeyQuota.checkKeyring()
        let q = try KeyQuota.current()
        let each = KeyQuota.perDomain(timeout: timeout)
        let room = q.room(each: each)
        let settings = q.settings(toAdd: each.times(domains))
        if json {
            printJSON([
                "keyring": "available", "uid": q.uid,
                "keys": ["used": q.used.keys, "max": q.limit.keys, "sysctl": q.keysSysctl],
                "bytes": ["used": q.used.bytes, "max": q.limit.bytes, "sysctl": q.bytesSysctl],
                "perDomain": ["keys": each.keys, "bytes": each.bytes], "room": room, "domains": domains,
                "raise": settings.map { ["sysctl": $0.name, "current": $0.current, "required": $0.required] },
            ])
        } else {
            print("keyring     available")
            print("uid         \(q.uid)")
            print("keys        \(q.used.keys) of \(q.limit.keys) (\(q.keysSysctl))")
            print("bytes       \(q.used.bytes) of \(q.limit.bytes) (\(q.bytesSysctl))")
            print("per domain  \(each.keys) key\(each.keys == 1 ? "" : "s"), \(each.bytes) bytes\(timeout ? " (unlocked with --timeout)" : "")")
            print("room        \(room) more unlocked domain\(room == 1 ? "" : "s")")
        }
        guard settings.isEmpty else {
            let binding = settings.map { "\($0.name) is \($0.current), needs \($0.required)" }.joined(separator: "; ")
            throw CLIError(
                exit: .io, message: "\(domains) more unlocked domains do not fit in uid \(q.uid)'s kernel key quota: \(binding)",
                hint: "as root: \(settings.map(\.command).joined(separator: " && ")) (and the same in /etc/sysctl.d/ to keep it after a reboot)")
        }
        if !json { print("ok          \(domains) more fit") }
    }
}
