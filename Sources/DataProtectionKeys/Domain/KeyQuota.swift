import DataProtectionFormat
import SystemLayer
import KernelKeyring

#if canImport(Glibc)
import Glibc
#endif

/// The kernel's key quota for one uid, as `/proc/key-users` and `/proc/sys/kernel/keys/` report it, and what
/// unlocked domains cost of it.
///
/// The kernel charges every key to its owner's uid: one key, and its description (plus its NUL) and payload in bytes.
/// A uid other than root may hold `kernel.keys.maxkeys` keys (default 200) and `kernel.keys.maxbytes` bytes (default
/// 20000); root has `root_maxkeys` and `root_maxbytes`. Past either, `add_key` fails with EDQUOT.
public struct KeyQuota: Sendable, Equatable {
    /// Keys and bytes of the quota.
    public struct Need: Sendable, Equatable {
        public var keys: Int
        public var bytes: Int
        public init(keys: Int, bytes: Int) { self.keys = keys; self.bytes = bytes }
        /// `n` times this.
        public func times(_ n: Int) -> Need { Need(keys: keys * n, bytes: bytes * n) }
    }

    /// A sysctl to raise, with its current value and the value needed.
    public struct Setting: Sendable, Equatable {
        /// The sysctl's name, e.g. `kernel.keys.maxbytes`.
        public let name: String
        public let current: Int
        public let required: Int
        /// The command that sets it (as root; not persistent across reboots: add it to /etc/sysctl.d too).
        public var command: String { "sysctl -w \(name)=\(required)" }
    }

    /// The uid the quota belongs to.
    public let uid: UInt32
    /// What the uid holds now (`qnkeys`, `qnbytes`): every key it owns, domains or not.
    public let used: Need
    /// Its limits (`maxkeys`, `maxbytes`, or root's).
    public let limit: Need

    public init(uid: UInt32, used: Need, limit: Need) {
        self.uid = uid
        self.used = used
        self.limit = limit
    }

    /// The sysctl limiting the number of keys of this uid.
    public var keysSysctl: String { uid == 0 ? "kernel.keys.root_maxkeys" : "kernel.keys.maxkeys" }
    /// The sysctl limiting the bytes of this uid's keys.
    public var bytesSysctl: String { uid == 0 ? "kernel.keys.root_maxbytes" : "kernel.keys.maxbytes" }

    /// What one unlocked domain costs: one key of 161 bytes; with `unlock --timeout`, two keys of 228 bytes in all.
    public static func perDomain(timeout: Bool) -> Need {
        let name = "dataprotection:".utf8.count + 2 * DomainID.size + 1  // description and its NUL
        guard timeout else { return Need(keys: 1, bytes: name + DomainKeyPayload.size(keys: 3, deadline: false)) }
        return Need(keys: 2, bytes: name + DomainKeyPayload.size(keys: 1, deadline: false) + name + ":expiring".utf8.count + DomainKeyPayload.size(keys: 2, deadline: true))
    }

    /// Room kept for the keyrings the kernel makes for the uid and the unlocking process on first use — the user
    /// keyring, the user-session keyring and the writer's process keyring `@p`, about 130 bytes each — which count
    /// against the same quota (conservative by up to two domains when they exist already).
    public static let writerHeadroom = Need(keys: 3, bytes: 512)

    /// How many more domains fit, each costing `each`, beside the writer's own keyring.
    public func room(each: Need) -> Int {
        let keys = limit.keys - used.keys - Self.writerHeadroom.keys, bytes = limit.bytes - used.bytes - Self.writerHeadroom.bytes
        return max(0, min(keys / max(each.keys, 1), bytes / max(each.bytes, 1)))
    }

    /// The sysctls to raise so that `more` fits on top of what the uid holds now (and the writer's own keyring);
    /// empty when it already fits.
    public func settings(toAdd more: Need) -> [Setting] {
        let keys = used.keys + more.keys + Self.writerHeadroom.keys, bytes = used.bytes + more.bytes + Self.writerHeadroom.bytes
        var out: [Setting] = []
        if keys > limit.keys { out.append(Setting(name: keysSysctl, current: limit.keys, required: keys)) }
        if bytes > limit.bytes { out.append(Setting(name: bytesSysctl, current: limit.bytes, required: bytes)) }
        return out
    }

    /// Throws the one `.keyringUnavailable` error when the kernel keyring is refused to this process (seccomp).
    public static func checkKeyring() throws(ProtectionError) {
        do throws(KeyringError) { try Keyring.checkAvailable() } catch {
            throw error.code == .unavailable ? DomainKeyring.unavailable(error) : DomainKeyring.translate(error)
        }
    }

    /// The quota of `uid` now.
    /// - Throws: `.io` naming the `/proc` file that could not be read or parsed (no procfs, an old kernel).
    public static func current(uid: UInt32 = UInt32(getuid())) throws(ProtectionError) -> KeyQuota {
        let io = SystemFileIO()
        let prefix = uid == 0 ? "root_" : ""
        let maxKeys = try number(try read("/proc/sys/kernel/keys/\(prefix)maxkeys", io), "/proc/sys/kernel/keys/\(prefix)maxkeys")
        let maxBytes = try number(try read("/proc/sys/kernel/keys/\(prefix)maxbytes", io), "/proc/sys/kernel/keys/\(prefix)maxbytes")
        // "  994:     7 7/7 7/200 262/20000": uid: usage nkeys/nikeys qnkeys/maxkeys qnbytes/maxbytes. No line: no keys yet.
        var used = Need(keys: 0, bytes: 0)
        for line in try read("/proc/key-users", io).split(separator: "\n") {
            let f = line.split(whereSeparator: { $0 == " " || $0 == "/" })
            guard f.count >= 8, f[0] == "\(uid):" else { continue }
            guard let k = Int(f[4]), let b = Int(f[6]) else { throw ProtectionError(.io(EIO), "unable to parse /proc/key-users line '\(line)'", path: "/proc/key-users") }
            used = Need(keys: k, bytes: b)
        }
        return KeyQuota(uid: uid, used: used, limit: Need(keys: maxKeys, bytes: maxBytes))
    }

    /// The error for a domain key the quota refused: which limit binds, which sysctl to raise, and by how much.
    static func exhausted(domain: DomainID, adding need: Need, underlying: KeyringError) -> ProtectionError {
        let each = perDomain(timeout: false)
        let fix: String
        if let q = try? current() {
            let binding = q.settings(toAdd: need).map(\.name)
            let names = binding.isEmpty ? [q.keysSysctl, q.bytesSysctl] : binding  // freed meanwhile: name both
            let more = each.times(100)
            let raise = q.settings(toAdd: more).filter { names.contains($0.name) }.map { "\($0.name)=\($0.required)" }
            fix = "uid \(q.uid) holds \(q.used.keys)/\(q.limit.keys) keys and \(q.used.bytes)/\(q.limit.bytes) bytes, and this key needs 1 key and \(need.bytes) bytes, so \(names.joined(separator: " and ")) \(names.count == 1 ? "binds" : "bind"); each unlocked domain takes \(each.keys) key and \(each.bytes) bytes (\(perDomain(timeout: true).keys) keys and \(perDomain(timeout: true).bytes) bytes with --timeout); as root, `sysctl -w \(raise.joined(separator: " "))` makes room for 100 more (`dpctl doctor --domains N` computes it for N)"
        } else {
            fix = "raise kernel.keys.maxkeys and kernel.keys.maxbytes (root: root_maxkeys, root_maxbytes); each unlocked domain takes \(each.keys) key and \(each.bytes) bytes (`dpctl doctor --domains N` computes the values for N)"
        }
        return ProtectionError(.io(EDQUOT), "unable to unlock domain \(domain): the kernel's key quota is used up: \(fix); or lock domains no longer in use (`dpctl lock --evict-all`)", underlying: underlying)
    }

    private static func read(_ path: String, _ io: SystemFileIO) throws(ProtectionError) -> String {
        let fd: Int32
        do throws(SystemError) { fd = try io.open(path, flags: O_RDONLY, mode: 0) } catch { throw .errno(error.errno, "read", path) }
        defer { io.close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while out.count < 1 << 20 {  // procfs files report size 0: read to the end
            let r: Result<Int, SystemError> = chunk.withUnsafeMutableBytes { b in
                do throws(SystemError) { return .success(try io.read(fd, into: b)) } catch { return .failure(error) }
            }
            let n: Int
            do throws(SystemError) { n = try r.get() } catch { throw .errno(error.errno, "read", path) }
            if n == 0 { break }
            out += chunk[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func number(_ text: String, _ path: String) throws(ProtectionError) -> Int {
        guard let v = Int(text.filter { !$0.isWhitespace }) else {
            throw ProtectionError(.io(EIO), "unable to parse '\(path)': expected a number", path: path)
        }
        return v
    }
}
