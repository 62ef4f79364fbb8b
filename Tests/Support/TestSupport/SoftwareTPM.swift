import Foundation

/// A fresh software TPM 2.0 (`swtpm socket --tpm2`) for one test: its own state directory, on two free TCP ports.
///
/// Each instance is a different "machine": swtpm generates new hierarchy seeds in a new state directory, so a key
/// made by one does not load in another. `stop()` (or deinit) kills the process and removes its state.
public final class SoftwareTPM {
    /// The TCTI string that reaches it: `swtpm:host=127.0.0.1,port=<server port>` (tss2's swtpm TCTI uses port+1 for control).
    public let tcti: String
    /// The server port (the control port is the next one).
    public let port: Int
    /// Its state directory (removed by `stop()`).
    public let stateDirectory: String
    private let process: Process

    /// Starts swtpm on a pair of free ports and waits until it accepts connections.
    /// - Throws: when swtpm is not installed (`scripts/setup` installs it) or does not come up within 10 s.
    public init() throws {
        let swtpm = ["/usr/bin/swtpm", "/usr/local/bin/swtpm"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let swtpm else { throw SoftwareTPMError("swtpm is not installed; run scripts/setup (Debian packages swtpm swtpm-tools)") }
        stateDirectory = NSTemporaryDirectory() + "swtpm-\(getpid())-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true)
        var lastError = ""
        for _ in 0..<20 {
            let port = Int.random(in: 20_000..<60_000) & ~1
            let p = Process()
            p.executableURL = URL(fileURLWithPath: swtpm)
            p.arguments = [
                "socket", "--tpm2", "--tpmstate", "dir=\(stateDirectory)", "--server", "type=tcp,port=\(port)", "--ctrl", "type=tcp,port=\(port + 1)",
                "--flags", "not-need-init,startup-clear", "--log", "file=\(stateDirectory)/log",
            ]
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.run()
            // Ready when the server port accepts a connection; a port taken by someone else makes swtpm exit.
            let deadline = Date().addingTimeInterval(10)
            while p.isRunning, Date() < deadline, !Self.accepts(port) { usleep(10_000) }
            if p.isRunning, Self.accepts(port) {
                self.port = port
                self.process = p
                tcti = "swtpm:host=127.0.0.1,port=\(port)"
                return
            }
            if p.isRunning { p.terminate() }
            p.waitUntilExit()
            lastError = (try? String(contentsOfFile: "\(stateDirectory)/log", encoding: .utf8)) ?? "no log"
        }
        try? FileManager.default.removeItem(atPath: stateDirectory)
        throw SoftwareTPMError("swtpm did not come up: \(lastError)")
    }

    /// Sets the dictionary-attack parameters (TPM2_DictionaryAttackParameters through tpm2-tools; lockout auth is empty).
    /// - Parameters:
    ///   - maxTries: failures before lockout.
    ///   - recoveryTime: seconds after which one failure is forgotten.
    ///   - lockoutRecovery: seconds after a failed lockout authorisation.
    public func setDictionaryAttack(maxTries: Int, recoveryTime: Int, lockoutRecovery: Int = 1) throws {
        try tool("tpm2_dictionarylockout", ["--setup-parameters", "--max-tries=\(maxTries)", "--recovery-time=\(recoveryTime)",
                                            "--lockout-recovery-time=\(lockoutRecovery)"])
    }

    /// Runs a tpm2-tools program against this TPM; returns its standard output.
    @discardableResult
    public func tool(_ name: String, _ arguments: [String]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/\(name)")
        p.arguments = arguments
        p.environment = childEnvironment(["TPM2TOOLS_TCTI": tcti, "TSS2_LOG": "all+NONE", "PATH": "/usr/bin:/bin"])
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        let errors = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            throw SoftwareTPMError("\(name) \(arguments.joined(separator: " ")) failed: \(String(decoding: errors, as: UTF8.self))")
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// Kills swtpm and removes its state directory (idempotent).
    public func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: stateDirectory)
    }

    deinit { stop() }

    private static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}

/// Why a software TPM could not be started or driven.
public struct SoftwareTPMError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
