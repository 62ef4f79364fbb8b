import DataProtectionKeys
import DataProtectionFiles
import SystemLayer
import ProtectionCrypto

#if canImport(Glibc)
import Glibc
#endif

/// The signed manifest of a container's bundle: every file's BLAKE2b-256 hash, size and mode.
public struct BundleManifest: Sendable, Equatable {
    /// One file or directory of the bundle.
    public struct Entry: Sendable, Equatable {
        /// Path relative to `Bundle/`.
        public let path: String
        public let isDirectory: Bool
        /// Permission bits as sealed (write bits cleared).
        public let mode: UInt32
        public let size: Int64
        /// BLAKE2b-256 of the contents (empty for directories).
        public let hash: [UInt8]
    }

    /// The key that signed it.
    public let publicKey: Ed25519PublicKey
    public let entries: [Entry]
}

/// Seals a container's bundle (signed manifest, read-only files) and verifies the seal.
///
/// The seal is the text file `Bundle/.bundle-seal` (format in the module README):
/// a header line, the signer's public key, one line per item, then an
/// Ed25519 signature over every byte before the signature line.
public enum BundleSeal {
    /// The seal's file name inside `Bundle/`.
    public static let sealFileName = ".bundle-seal"
    static let magic = "dataprotection-bundle-seal v1"
    static var sealPath: String { ContainerDirectory.bundle.relativePath + "/" + sealFileName }

    /// Hashes every item of the container's bundle, writes the signed manifest and makes the bundle read-only.
    /// - Throws: `.invalidArgument` for a symbolic link or special file in the bundle; `.io`.
    @discardableResult
    public static func seal(containerAt root: String, signingKey: borrowing Ed25519KeyPair) throws(ProtectionError) -> BundleManifest {
        let c = try confinement(root)
        let entries = try scan(c, sealing: true)
        let manifest = BundleManifest(publicKey: signingKey.publicKey, entries: entries)
        var text = body(manifest)
        let sig = Array(text.utf8).withUnsafeBytes { signingKey.sign($0) }
        text += "sig \(hex(sig))\n"
        do throws(SystemError) {
            try c.writeFileAtomically(sealPath, Array(text.utf8), mode: 0o444)
            // Directories last, deepest first, so nothing is left writable and nothing blocks the writes above.
            for e in entries.reversed() where e.isDirectory { try chmod(c, bundlePath(e.path), e.mode) }
            try chmod(c, ContainerDirectory.bundle.relativePath, 0o555)
        } catch { throw c.failure(error.errno, "seal", ContainerDirectory.bundle.relativePath) }
        return manifest
    }

    /// Verifies the container's bundle against its seal.
    /// - Parameters:
    ///   - root: the container's root directory.
    ///   - key: the signer the caller trusts (from the app's configuration, never from the
    ///     container); nil checks only that the bundle matches the key recorded in the seal, which
    ///     detects damage but not someone who re-sealed the bundle with their own key.
    /// - Throws: `.bundleTampered` naming the first difference; `.io`.
    @discardableResult
    public static func verify(containerAt root: String, trusting key: Ed25519PublicKey?) throws(ProtectionError) -> BundleManifest {
        try verify(try confinement(root), trusting: key)
    }

    static func verify(_ c: Confinement, trusting key: Ed25519PublicKey?) throws(ProtectionError) -> BundleManifest {
        let sealed = try readSeal(c, trusting: key)
        let actual = try scan(c, sealing: false)
        let want = Dictionary(sealed.entries.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
        let have = Dictionary(actual.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
        for e in sealed.entries where have[e.path] == nil { throw tampered(c, "lacks '\(e.path)'") }
        for e in actual {
            guard let w = want[e.path] else { throw tampered(c, "has '\(e.path)', which was not sealed") }
            if w.isDirectory != e.isDirectory || w.size != e.size || w.hash != e.hash { throw tampered(c, "has a modified '\(e.path)'") }
            if w.mode != e.mode { throw tampered(c, "has '\(e.path)' with mode \(String(e.mode, radix: 8)) instead of \(String(w.mode, radix: 8))") }
        }
        return sealed
    }

    /// The error for a bundle that does not match its seal, `why` naming the difference.
    static func tampered(_ c: Confinement, _ why: String) -> ProtectionError {
        ProtectionError(.bundleTampered, "the bundle of the container '\(c.root)' \(why); reinstall the bundle and seal it again (`dpctl bundle seal`)", path: c.root + "/" + ContainerDirectory.bundle.relativePath)
    }

    /// The seal's manifest, its signature verified (against `key` when given); the bundle's files are not read.
    /// - Throws: `.bundleTampered` for a missing, malformed, unsigned or foreign seal; `.io`.
    static func readSeal(_ c: Confinement, trusting key: Ed25519PublicKey?) throws(ProtectionError) -> BundleManifest {
        func tampered(_ why: String) -> ProtectionError { Self.tampered(c, why) }
        let bytes: [UInt8]
        do throws(SystemError) { bytes = try c.readFile(sealPath, limit: 64 << 20) } catch {
            if error.errno == ENOENT { throw tampered("is not sealed (no \(sealFileName))") }
            throw c.failure(error.errno, "read the seal", sealPath)
        }
        let text = String(decoding: bytes, as: UTF8.self)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard text.hasSuffix("\n"), lines.count >= 2, lines[lines.count - 2].hasPrefix("sig ") else { throw tampered("has a malformed seal") }
        let sigLine = lines[lines.count - 2]
        let signed = Array(bytes[..<(bytes.count - sigLine.utf8.count - 1)])
        let sig = unhex(String(sigLine.dropFirst(4)))
        guard sig.count == 64, let sealed = parse(String(decoding: signed, as: UTF8.self)) else { throw tampered("has a malformed seal") }
        if let key, key != sealed.publicKey { throw tampered("was sealed by a different key than the one trusted") }
        guard signed.withUnsafeBytes({ sealed.publicKey.isValidSignature(sig, for: $0) }) else { throw tampered("has a seal whose signature does not verify") }
        return sealed
    }

    // MARK: Internals

    private static func confinement(_ root: String) throws(ProtectionError) -> Confinement {
        do throws(SystemError) { return try Confinement(root: root) } catch { throw .errno(error.errno, "open the container", root) }
    }

    static func bundlePath(_ p: String) -> String { ContainerDirectory.bundle.relativePath + "/" + p }

    /// Every item under `Bundle/` except the seal, sorted; with `sealing`, files are made read-only first.
    private static func scan(_ c: Confinement, sealing: Bool) throws(ProtectionError) -> [BundleManifest.Entry] {
        var out: [BundleManifest.Entry] = []
        let prefix = ContainerDirectory.bundle.relativePath + "/"
        do throws(SystemError) {
            try c.walk(ContainerDirectory.bundle.relativePath) { (p, st) throws(SystemError) in
                let rel = String(p.dropFirst(prefix.count))
                if rel == sealFileName { return }
                let kind = st.st_mode & S_IFMT
                guard kind == S_IFREG || kind == S_IFDIR else {
                    throw SystemError(sealing ? EINVAL : ENOTSUP)
                }
                let mode = UInt32(st.st_mode & 0o7777) & (sealing ? ~0o222 : ~0)
                if kind == S_IFDIR {
                    out.append(.init(path: rel, isDirectory: true, mode: sealing ? 0o555 : mode, size: 0, hash: []))
                    return
                }
                if sealing { try chmod(c, p, mode) }
                out.append(.init(path: rel, isDirectory: false, mode: mode, size: Int64(st.st_size), hash: try hashFile(c, p)))
            }
        } catch {
            if error.errno == ENOTSUP {
                throw ProtectionError(.bundleTampered, "the bundle of the container '\(c.root)' holds a symbolic link or special file; reinstall the bundle and seal it again (`dpctl bundle seal`)", path: c.root)
            }
            if error.errno == EINVAL {
                throw ProtectionError(.invalidArgument, "unable to seal the bundle of '\(c.root)': it holds a symbolic link or special file; replace it by a regular copy", path: c.root)
            }
            throw c.failure(error.errno, "scan", ContainerDirectory.bundle.relativePath)
        }
        return out.sorted { $0.path < $1.path }
    }

    static func hashFile(_ c: Confinement, _ path: String) throws(SystemError) -> [UInt8] {
        let fd = try c.open(path, flags: O_RDONLY | O_NOFOLLOW, noSymlinks: true)
        defer { c.io.close(fd) }
        return try hash(c, fd)
    }

    /// BLAKE2b-256 of the open file `fd`, read to its end.
    static func hash(_ c: Confinement, _ fd: Int32) throws(SystemError) -> [UInt8] {
        var h: StreamingHash
        do { h = try StreamingHash() } catch { throw SystemError(ENOMEM) }
        var buf = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = try buf.withUnsafeMutableBytes { b in Result { () throws(SystemError) in try c.io.read(fd, into: b) } }.get()
            if n == 0 { break }
            buf.withUnsafeBytes { h.update(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
        }
        return h.finalize()
    }

    private static func chmod(_ c: Confinement, _ path: String, _ mode: UInt32) throws(SystemError) {
        try c.withParent(of: path) { (fd, name) throws(SystemError) in
            try c.io.changeMode(of: name, in: fd, to: mode_t(mode))
        }
    }

    /// The manifest text before the signature line.
    static func body(_ m: BundleManifest) -> String {
        var s = "\(magic)\nkey \(hex(m.publicKey.bytes))\n"
        for e in m.entries {
            s += e.isDirectory
                ? "d \(String(e.mode, radix: 8)) \(escape(e.path))\n"
                : "f \(String(e.mode, radix: 8)) \(e.size) \(hex(e.hash)) \(escape(e.path))\n"
        }
        return s
    }

    static func parse(_ text: String) -> BundleManifest? {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard lines.last == "" else { return nil }
        lines.removeLast()
        guard lines.count >= 2, lines[0] == magic, lines[1].hasPrefix("key "),
              let key = try? Ed25519PublicKey(bytes: unhex(String(lines[1].dropFirst(4)))) else { return nil }
        var entries: [BundleManifest.Entry] = []
        for line in lines.dropFirst(2) {
            let f = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
            if f.count == 3, f[0] == "d", let mode = UInt32(f[1], radix: 8), let p = unescape(f[2]) {
                entries.append(.init(path: p, isDirectory: true, mode: mode, size: 0, hash: []))
            } else if f.count == 5, f[0] == "f", let mode = UInt32(f[1], radix: 8), let size = Int64(f[2]), case let h = unhex(f[3]), h.count == 32, let p = unescape(f[4]) {
                entries.append(.init(path: p, isDirectory: false, mode: mode, size: size, hash: h))
            } else {
                return nil
            }
        }
        return BundleManifest(publicKey: key, entries: entries)
    }

    /// Percent-encodes every byte outside `[A-Za-z0-9._/-]`, so a path is one space-free token.
    static func escape(_ p: String) -> String {
        var out = ""
        for b in p.utf8 {
            let c = Character(Unicode.Scalar(b))
            if b < 0x80, c.isLetter || c.isNumber || "._/-".contains(c) { out.append(c) } else { out += "%" + String(format2: b) }
        }
        return out
    }

    static func unescape(_ s: String) -> String? {
        var bytes: [UInt8] = []
        var it = Array(s.utf8)[...]
        while let b = it.popFirst() {
            if b == UInt8(ascii: "%") {
                guard it.count >= 2, let v = UInt8(String(decoding: it.prefix(2), as: UTF8.self), radix: 16) else { return nil }
                bytes.append(v)
                it = it.dropFirst(2)
            } else {
                bytes.append(b)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}

/// Lowercase hex of `bytes`.
func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format2: $0) }.joined() }

/// The bytes of a hex string; empty when malformed.
func unhex(_ s: String) -> [UInt8] {
    let u = Array(s.utf8)
    guard u.count % 2 == 0 else { return [] }
    var out: [UInt8] = []
    var i = 0
    while i < u.count {
        guard let v = UInt8(String(decoding: u[i..<i + 2], as: UTF8.self), radix: 16) else { return [] }
        out.append(v)
        i += 2
    }
    return out
}

extension String {
    /// Two lowercase hex digits.
    init(format2 b: UInt8) { self = (b < 16 ? "0" : "") + String(b, radix: 16) }
}
