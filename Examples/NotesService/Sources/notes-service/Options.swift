// notes-service's command line.
import Foundation

/// What the command line says: where the users' domains and containers live, and where to listen.
struct Options {
    /// `STATE/users/<user>/domain` is each user's protection domain (made by `dpctl init`), `STATE/users/<user>/container`
    /// its container (made at the first start), `STATE/devices` the domains' device secrets.
    var state = ""
    var host = "127.0.0.1"
    /// 0 picks a free port; the one chosen is printed on standard output ("listening on http://HOST:PORT").
    var port = 8080
    /// The largest request body accepted, in bytes.
    var maxBody = 16 << 20

    static let usage = "usage: notes-service --state DIR [--host 127.0.0.1] [--port 8080] [--max-body BYTES]\n"

    /// Parses `arguments` (without the program name); exits 64 with the usage on a mistake.
    static func parse(_ arguments: [String]) -> Options {
        var o = Options()
        var it = arguments.makeIterator()
        func value(_ flag: String) -> String {
            guard let v = it.next() else { fail("\(flag) needs a value") }
            return v
        }
        while let a = it.next() {
            switch a {
            case "--state": o.state = value(a)
            case "--host": o.host = value(a)
            case "--port": guard let p = Int(value(a)), (0...65535).contains(p) else { fail("--port takes 0…65535") }; o.port = p
            case "--max-body": guard let m = Int(value(a)), m > 0 else { fail("--max-body takes a positive byte count") }; o.maxBody = m
            case "-h", "--help": print(usage, terminator: ""); exit(0)
            default: fail("unknown argument '\(a)'")
            }
        }
        if o.state.isEmpty { fail("--state DIR is required") }
        return o
    }

    private static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("notes-service: error: \(message)\n\(usage)".utf8))
        exit(64)
    }
}

/// One line on standard output, flushed at once (tests and supervisors read it as it comes).
func say(_ line: String) {
    print(line)
    fflush(nil)
}
