// Opens a container and holds it in use until standard input closes: the "live process" of the purge tests.
//
// Usage: container-hold <container root> [<file to keep open for writing>]
// Prints "holding" once the container is open (and the file, if named, is created and open).
import DataProtection

#if canImport(Glibc)
import Glibc
#endif

/// Writes `s` to a descriptor unbuffered.
func emit(_ fd: Int32, _ s: String) { _ = s.withCString { write(fd, $0, strlen($0)) } }

let args = CommandLine.arguments
guard args.count >= 2 else {
    emit(2, "usage: container-hold <container root> [<file to keep open for writing>]\n")
    exit(64)
}
do {
    let container = try Container(at: args[1], keys: try InMemoryClassKeys.random())
    let handle = try args.count > 2 ? container.create(args[2]) : nil
    emit(1, "holding\n")
    var byte: UInt8 = 0
    while read(0, &byte, 1) > 0 {}
    handle?.close()
    container.close()
} catch {
    emit(2, "container-hold: error: \(error)\n")
    exit(1)
}
