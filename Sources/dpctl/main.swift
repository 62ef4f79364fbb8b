// dpctl: lock, unlock and inspect a protection domain, and work with its protected files.
import ArgumentParser
import DataProtection

#if canImport(Glibc)
import Glibc
#endif

do {
    var command = try Dpctl.parseAsRoot(placingLeadingLogLevel(Array(CommandLine.arguments.dropFirst())))
    try command.run()
} catch let error as ProtectionError {
    Failure.report(error)
} catch let error as CLIError {
    Failure.report(error)
} catch {
    Failure.reportParserError(error)
}
