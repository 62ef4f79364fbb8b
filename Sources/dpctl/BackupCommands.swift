import ArgumentParser
import DataProtection

/// `dpctl backup-excludes`: the exclude list for a backup tool.
struct BackupExcludes: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup-excludes",
        abstract: "Print the exclude list of a container for restic, borg, rsync or GNU tar.",
        discussion: """
            Lists what the container's policy leaves out: Library/Caches, tmp, the bundle, the runtime lock, \
            and every item flagged excluded from backup. Use it with the tool's own options:

              restic backup --exclude-caches --exclude-file=LIST ROOT
              borg create --exclude-caches --exclude-from=LIST REPO::NAME ROOT      (ROOT absolute)
              rsync -a --exclude-from=LIST ROOT/ DEST/
              tar -C ROOT --exclude-caches --anchored --no-wildcards --exclude-from=LIST -cf OUT .

            Protected files are copied as ciphertext, so the backup works while the domain is locked.
            """)
    @Option(help: "restic, borg, rsync or tar.") var format: BackupPolicy.ExcludeFormat = .restic
    @Argument(help: "The container root (give the tool the same path).") var container: String

    func run() throws {
        print(try BackupPolicy.excludeList(containerAt: container, format: format), terminator: "")
    }
}

/// `dpctl backup-list`: what a backup of a container holds.
struct BackupList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup-list", abstract: "Show what a backup of a container holds, with sizes (ciphertext bytes).")
    @Flag(help: "Also show the items left out, with the reason.") var all = false
    @Argument(help: "The container root.") var container: String

    func run() throws {
        let plan = try BackupPolicy.plan(containerAt: container)
        var total: Int64 = 0
        for e in plan {
            if e.isIncluded {
                if !e.isDirectory { total += e.size }
                print("\(e.isDirectory ? "-" : String(e.size))".leftPadded(12) + "  " + e.path + (e.isDirectory ? "/" : ""))
            } else if all && !e.isCoveredByParent {
                print("excluded".leftPadded(12) + "  " + e.path + (e.isDirectory ? "/" : "") + "  (\(e.exclusionReason ?? ""))")
            }
        }
        print("\(total)".leftPadded(12) + "  total bytes backed up")
    }
}

extension BackupPolicy.ExcludeFormat: ExpressibleByArgument {}
