import ArgumentParser
import DataProtection
import Foundation
import ProtectionCrypto

/// `dpctl bundle`: seal a container's bundle and verify the seal.
struct BundleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bundle", abstract: "Seal a container's read-only bundle, and verify the seal.",
        subcommands: [BundleKeygen.self, BundleSealCommand.self, BundleVerify.self])
}

/// `dpctl bundle keygen`.
struct BundleKeygen: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "keygen", abstract: "Make an Ed25519 signing key file (mode 0600); prints the public key.")
    @Argument(help: "The key file to create.") var keyFile: String

    func run() throws {
        let pair = try Ed25519KeyPair.generate()
        // The hex text of the secret lives only in locked memory on its way to the file.
        var text = try SecretBytes(zeroedCount: 129)
        let digits = Array("0123456789abcdef".utf8)
        pair.secretKey.withUnsafeBytes { k in
            text.withUnsafeMutableBytes { t in
                for i in 0..<64 {
                    t[2 * i] = digits[Int(k[i] >> 4)]
                    t[2 * i + 1] = digits[Int(k[i] & 15)]
                }
                t[128] = UInt8(ascii: "\n")
            }
        }
        let fd = open(keyFile, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ProtectionError(errno == EEXIST ? .alreadyExists : .io(errno), "unable to create the key file '\(keyFile)': \(String(cString: strerror(errno)))", path: keyFile) }
        defer { close(fd) }
        let written = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == 129, fsync(fd) == 0 else { throw ProtectionError(.io(errno), "unable to write the key file '\(keyFile)'", path: keyFile) }
        print(pair.publicKey.bytes.map { String(format: "%02x", $0) }.joined())
    }
}

/// `dpctl bundle seal`.
struct BundleSealCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "seal", abstract: "Hash every file of the bundle into a signed manifest and make the bundle read-only.")
    @Option(help: ArgumentHelp("The signing key file (from `dpctl bundle keygen`).", valueName: "file")) var key: String
    @Argument(help: "The container root.") var container: String

    func run() throws {
        let pair = try Self.loadSigningKey(key)
        let m = try BundleSeal.seal(containerAt: container, signingKey: pair)
        print("sealed \(m.entries.count) items; public key \(m.publicKey.bytes.map { String(format: "%02x", $0) }.joined())")
    }

    /// Reads a key file written by `keygen` straight into locked memory.
    static func loadSigningKey(_ path: String) throws -> Ed25519KeyPair {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ProtectionError(errno == ENOENT ? .notFound : .io(errno), "unable to read the key file '\(path)': \(String(cString: strerror(errno)))", path: path) }
        defer { close(fd) }
        var text = try SecretBytes(zeroedCount: 130)
        let n = text.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        var key = try SecretBytes(zeroedCount: 64)
        var valid = n == 128 || n == 129
        text.withUnsafeBytes { t in
            key.withUnsafeMutableBytes { k in
                func nibble(_ c: UInt8) -> UInt8? {
                    switch c {
                    case 48...57: c - 48
                    case 97...102: c - 87
                    case 65...70: c - 55
                    default: nil
                    }
                }
                for i in 0..<64 {
                    guard let hi = nibble(t[2 * i]), let lo = nibble(t[2 * i + 1]) else { valid = false; return }
                    k[i] = hi << 4 | lo
                }
            }
        }
        guard valid else { throw ValidationError("'\(path)' does not hold an Ed25519 secret key (128 hex digits, from `dpctl bundle keygen`)") }
        return try Ed25519KeyPair(secretKey: key)
    }

    static func unhex(_ s: String) -> [UInt8] {
        let u = Array(s.utf8)
        guard u.count % 2 == 0 else { return [] }
        return stride(from: 0, to: u.count, by: 2).compactMap { UInt8(String(decoding: u[$0..<$0 + 2], as: UTF8.self), radix: 16) }
    }
}

/// `dpctl bundle verify`.
struct BundleVerify: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify", abstract: "Check the bundle against its seal; exits non-zero when it was tampered with.",
        discussion: "Without --public-key only damage is detected: whoever can write the bundle can also re-seal it with their own key.")
    @Option(name: .customLong("public-key"), help: ArgumentHelp("The signer's public key (64 hex digits) to trust.", valueName: "hex")) var publicKey: String?
    @Argument(help: "The container root.") var container: String

    func run() throws {
        var trusted: Ed25519PublicKey?
        if let publicKey {
            let b = BundleSealCommand.unhex(publicKey)
            guard b.count == 32 else { throw ValidationError("--public-key takes 64 hex digits") }
            trusted = try Ed25519PublicKey(bytes: b)
        }
        let m = try BundleSeal.verify(containerAt: container, trusting: trusted)
        print("ok: \(m.entries.count) items match the seal\(trusted == nil ? " (signer not pinned: pass --public-key)" : "")")
    }
}
