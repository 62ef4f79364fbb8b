// Opens a container and holds it in use until standard input closes: the "live process" of the purge tests.
//
// Usage: container-hold <container root> [<file to keep open for writing>]
//        container-hold <container root> increment <preferences key> <count>
//        container-hold <container root> prefs get <key> | prefs set <key> <integer or string>
//        container-hold <container root> merge <relative path> <text>
// Prints "holding" once the container is open (and the file, if named, is created and open).
// The increment form adds 1 to an integer preference <count> times, each a separate locked update;
// it reads the container's class-C key (generation 1, 64 hex digits) from standard input first.
// The prefs form is a second app process on the container's standard preferences, through the real domain the
// environment names (DATAPROTECTION_HOME, DATAPROTECTION_DEVICE_DIR, DATAPROTECTION_KEYRING): get prints the value
// (`integer 41`, `string hi`, `absent`); set stores an integer when the text is one, else a string.
// The merge form is iOS code in a second app process: an NSFileCoordinator write with .forMerging that appends <text>
// to the protected file (presenters elsewhere save and relinquish first); prints "merged <size>" or the error, then
// stays until standard input closes.
import DataProtection
import DataProtectionFoundation
import Foundation
import ProtectionCrypto

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
/// The environment variables that name the domain.
func domainEnvironment() -> [String: String] {
    var env: [String: String] = [:]
    for k in ["HOME", "DATAPROTECTION_HOME", "DATAPROTECTION_DEVICE_DIR", "DATAPROTECTION_KEYRING"] { if let v = getenv(k) { env[k] = String(cString: v) } }
    return env
}

/// Appends `text` to the file at `relative` under an NSFileCoordinator merging write, as an iOS app would.
func merge(root: String, relative: String, text: String) throws {
    let env = domainEnvironment()
    let domain = try ProtectionDomain.open(at: try DomainLocation.resolve(environment: env), keyStore: .kernel(try KeyringParent.from(environment: env)))
    try AppContext.bootstrap(try AppContext(domain: domain, containerAt: root))
    let url = URL(fileURLWithPath: root + "/" + relative)
    var error: NSError?, size = 0
    NSFileCoordinator().coordinate(writingItemAt: url, options: .forMerging, error: &error) { url in
        let merged = ((try? Data(contentsOf: url)) ?? Data()) + Data(text.utf8)
        do { try merged.write(to: url); size = merged.count } catch { emit(2, "container-hold: write: \(error)\n") }
    }
    if let error { emit(2, "container-hold: coordinate: \(error)\n"); exit(1) }
    emit(1, "merged \(size)\n")
    // Stay until standard input closes: the change notifications after the access are sent without waiting, and
    // would be lost if the process exited at once.
    var byte: UInt8 = 0
    while read(0, &byte, 1) > 0 {}
}

do {
    if args.count == 5, args[2] == "merge" {
        try merge(root: args[1], relative: args[3], text: args[4])
        exit(0)
    }
    if args.count >= 5, args[2] == "prefs" {
        let env = domainEnvironment()
        let domain = try ProtectionDomain.open(at: try DomainLocation.resolve(environment: env), keyStore: .kernel(try KeyringParent.from(environment: env)))
        let container = try Container(at: args[1], keys: domain.keys)
        let prefs = try container.preferences()
        switch (args[3], args.count) {
        case ("get", 5):
            switch try prefs.value(forKey: args[4]) {
            case .integer(let v)?: emit(1, "integer \(v)\n")
            case .string(let v)?: emit(1, "string \(v)\n")
            case let v?: emit(1, "other \(v)\n")
            case nil: emit(1, "absent\n")
            }
        case ("set", 6): try prefs.set(Int64(args[5]).map(PreferenceValue.integer) ?? .string(args[5]), forKey: args[4])
        default: emit(2, "usage: container-hold <root> prefs get <key> | prefs set <key> <value>\n"); exit(64)
        }
        container.close()
        exit(0)
    }
    if args.count == 5, args[2] == "increment", let n = Int(args[4]) {
        var hex = [UInt8](repeating: 0, count: 64)
        guard read(0, &hex, 64) == 64 else { emit(2, "container-hold: expected the class key on standard input\n"); exit(64) }
        let key = try (0..<32).map { i -> UInt8 in
            guard let b = UInt8(String(decoding: hex[2 * i..<2 * i + 2], as: UTF8.self), radix: 16) else { throw ProtectionError(.invalidArgument, "bad key digit") }
            return b
        }
        let secret = try key.withUnsafeBytes { SharedSecret(try SecretBytes(copying: $0)) }
        let keys = InMemoryClassKeys([ClassKey(.completeUntilFirstUserAuthentication, generation: 1, secret: secret)])
        let container = try Container(at: args[1], keys: keys)
        let prefs = try container.preferences()
        for _ in 0..<n {
            try prefs.update { values in
                if case .integer(let v)? = values[args[3]] { values[args[3]] = .integer(v + 1) } else { values[args[3]] = .integer(1) }
            }
        }
        container.close()
        exit(0)
    }
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
