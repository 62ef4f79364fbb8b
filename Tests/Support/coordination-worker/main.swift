// coordination-worker: a real process for the cross-process tests of FileCoordination and DataProtection.
//
// Usage: coordination-worker <command> --root DIR [options]; see WorkerCommand.swift for commands.
import Foundation

do {
    let arguments = try WorkerArguments(CommandLine.arguments.dropFirst())
    let code = try WorkerCommand.run(arguments)
    exit(code)
} catch {
    FileHandle.standardError.write(Data("coordination-worker: error: \(error)\n".utf8))
    exit(2)
}
