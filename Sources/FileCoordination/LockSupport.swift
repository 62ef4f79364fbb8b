// Whether OFD locks hold on a filesystem: statfs magic, the mount type, and a live probe.
internal import SystemLayer
internal import Glibc
import Foundation
internal import PathSyntax

/// The verdict on a filesystem for holding coordination locks.
public struct LockSupport: Sendable, Equatable {
    /// The filesystem's name as the kernel reports it (mount type, or the statfs magic in hex).
    public let filesystem: String
    /// Whether OFD byte-range locks on it exclude every process that uses the same files.
    public let isReliable: Bool
    /// Why the locks are unreliable, empty when they are reliable.
    public let reason: String

    /// Judges a filesystem from its statfs magic and its mount type (the `fstype` of mountinfo).
    /// - Parameters:
    ///   - magic: `statfs.f_type`.
    ///   - mountType: the mount's filesystem type, for example `nfs4` or `fuse.gocryptfs`.
    public static func assess(magic: Int64, mountType: String?) -> LockSupport {
        let name = mountType ?? "0x" + String(UInt64(bitPattern: magic), radix: 16)
        switch UInt64(bitPattern: magic) {
        case 0x6969:
            if name.hasPrefix("nfs4") { return LockSupport(filesystem: name, isReliable: true, reason: "") }
            return LockSupport(
                filesystem: name, isReliable: false,
                reason: "NFS before version 4 maps locks to the NLM side protocol, which does not carry open-file-description ownership")
        case 0x6573_5546:
            return LockSupport(
                filesystem: name, isReliable: false,
                reason: "FUSE filesystems decide themselves whether byte-range locks reach the storage; most keep them local or ignore them")
        case 0xFF53_4D42, 0xFE53_4D42, 0x517B:
            return LockSupport(
                filesystem: name, isReliable: false,
                reason: "SMB/CIFS byte-range locks are mandatory Windows locks with different ownership")
        case 0x0102_1997:
            return LockSupport(filesystem: name, isReliable: false, reason: "9p passes locks to the host only when the server supports it")
        case 0x5346_414F:
            return LockSupport(filesystem: name, isReliable: false, reason: "AFS supports only whole-file locks")
        default:
            return LockSupport(filesystem: name, isReliable: true, reason: "")
        }
    }

    /// Judges the filesystem that holds `path`, by statfs and /proc/self/mountinfo.
    /// - Parameter path: an existing directory or file.
    /// - Throws: `CoordinationError.lockDirectoryUnavailable` when statfs fails.
    public static func probe(path: String) throws(CoordinationError) -> LockSupport {
        let magic: Int64
        do throws(SystemError) { magic = try fileSystemMagic(of: path) } catch {
            throw CoordinationError(
                .lockDirectoryUnavailable, path: path, message: "cannot statfs '\(path)'", errno: error.errno)
        }
        return assess(magic: magic, mountType: mountType(containing: path))
    }

    /// The fstype of the deepest mount point containing `path`, from /proc/self/mountinfo.
    static func mountType(containing path: String) -> String? {
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return nil }
        var best: (length: Int, type: String)?
        for line in text.split(separator: "\n") {
            let halves = line.components(separatedBy: " - ")
            guard halves.count == 2 else { continue }
            let fields = halves[0].split(separator: " ")
            let tail = halves[1].split(separator: " ")
            guard fields.count >= 5, let type = tail.first else { continue }
            let mountPoint = String(fields[4]).replacingOccurrences(of: "\\040", with: " ")
            let inside = samePath(path, mountPoint) || isPath(path, inside: mountPoint)
            if inside, mountPoint.utf8.count > (best?.length ?? -1) { best = (mountPoint.utf8.count, String(type)) }
        }
        return best?.type
    }
}
