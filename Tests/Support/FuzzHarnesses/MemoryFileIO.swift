// The protected-file fuzz harness, shared by the FuzzHeader and FuzzChunks targets (Fuzz/, through this
// target's product) and FuzzRegressionTests: an in-memory FileIO holding one file, so fuzz inputs never
// touch the disk, the fixed fuzz keys, and the read oracle.
@_spi(Testing) import DataProtection  // ProtectedFiles(keys:io:), the fault-injection seam, is testing SPI
import ProtectionCrypto
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One file in memory behind the `FileIO` seam (fuzzing only: no directories, one descriptor).
final class MemoryFileIO: FileIO {
    private let bytes: Mutex<[UInt8]>
    init(_ contents: [UInt8]) { bytes = Mutex(contents) }

    func open(_ path: String, flags: Int32, mode: mode_t) throws(SystemError) -> Int32 { 3 }
    func close(_ fd: Int32) {}
    func pread(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(SystemError) -> Int {
        bytes.withLock { b in
            guard offset < Int64(b.count) else { return 0 }
            let n = min(buffer.count, b.count - Int(offset))
            b.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + Int(offset), byteCount: n) }
            return n
        }
    }
    func pwrite(_ fd: Int32, from buffer: UnsafeRawBufferPointer, at offset: Int64) throws(SystemError) -> Int { throw SystemError(EROFS) }
    func fsync(_ fd: Int32) throws(SystemError) {}
    func ftruncate(_ fd: Int32, to size: Int64) throws(SystemError) { throw SystemError(EROFS) }
    func size(_ fd: Int32) throws(SystemError) -> Int64 { Int64(bytes.withLock { $0.count }) }
    func rename(_ from: String, to: String) throws(SystemError) { throw SystemError(EROFS) }
    func unlink(_ path: String) throws(SystemError) { throw SystemError(EROFS) }
    func openAt(_ directory: Int32, _ name: String, flags: Int32, mode: mode_t) throws(SystemError) -> Int32 { throw SystemError(EROFS) }
    func renameAt(_ directory: Int32, _ from: String, to: String) throws(SystemError) { throw SystemError(EROFS) }
    func unlinkAt(_ directory: Int32, _ name: String) throws(SystemError) { throw SystemError(EROFS) }
    func identityAt(_ directory: Int32, _ name: String) throws(SystemError) -> (device: UInt64, inode: UInt64) { throw SystemError(ENOENT) }
    func copyUserAttributes(at directory: Int32, from name: String, to destination: Int32) throws(SystemError) { throw SystemError(EROFS) }
}

/// Fixed class keys for every class (generation 1): seeds are written with them, so the
/// fuzzer starts from files that authenticate and mutates past every check.
public func fuzzKeys() throws -> InMemoryClassKeys {
    var keys: [ClassKey] = []
    for c in ProtectionClass.allCases {
        let secret = try [UInt8](repeating: c.rawValue, count: 32).span.bytes.withUnsafeBytes { (b) throws(CryptoError) in try SecretBytes(copying: b) }
        let pk = c.usesPublicKeySealing ? try X25519KeyPair(secretKey: try secret.duplicate()).publicKey : nil
        keys.append(ClassKey(c, generation: 1, secret: SharedSecret(secret), publicKey: pk))
    }
    return InMemoryClassKeys(keys)
}

/// Opens `bytes` as a protected file and reads all of it; returns the plaintext or the typed error.
///
/// Any outcome but a `ProtectionError` or plaintext (a crash, a sanitizer report,
/// another error type) is a finding.
public func openAndRead(_ bytes: [UInt8], keys: InMemoryClassKeys) -> Result<[UInt8], ProtectionError> {
    let files = ProtectedFiles(keys: keys, io: MemoryFileIO(bytes))
    do {
        let h = try files.open("/fuzz")
        defer { h.close() }
        let size = try h.size
        guard size <= 1 << 24 else { return .success([]) }
        let all = try h.read(at: 0, count: Int(size))
        precondition(all.count == Int(size), "a successful read returned \(all.count) of \(size) bytes")
        // Reading in pieces must give the same bytes as reading at once.
        var pieces: [UInt8] = []
        var off: Int64 = 0
        while off < size { let p = try h.read(at: off, count: 1000); pieces += p; off += Int64(p.count) }
        precondition(pieces == all, "piecewise read differs from a whole read")
        return .success(all)
    } catch let e as ProtectionError {
        return .failure(e)
    } catch {
        preconditionFailure("an error that is not a ProtectionError: \(error)")
    }
}

/// Reads the header of `bytes` as `ProtectedFiles.info` does: its info, or the typed error.
public func readInfo(_ bytes: [UInt8], keys: InMemoryClassKeys) -> Result<ProtectedFileInfo, ProtectionError> {
    Result { () throws(ProtectionError) in try ProtectedFiles(keys: keys, io: MemoryFileIO(bytes)).info("/fuzz") }
}

/// Valid protected files of several sizes and both ciphers, written with `fuzzKeys()`.
public func makeSeedFiles(_ keys: InMemoryClassKeys) throws -> [[UInt8]] {
    var out: [[UInt8]] = []
    let dir = "/tmp/dp-fuzz-seeds-\(getpid())"
    mkdir(dir, 0o700)
    defer { rmdir(dir) }
    for cipher in AEADCipher.allCases where cipher.isAvailable {
        let files = ProtectedFiles(keys: keys, options: .init(cipher: cipher, chunkSize: 4096))
        for (i, n) in [0, 1, 4095, 4096, 4097, 10_000].enumerated() {
            let path = "\(dir)/s\(i)"
            try files.write([UInt8](repeating: UInt8(i), count: n), to: path, protection: ProtectionClass.allCases[i % 4])
            let fd = Glibc.open(path, O_RDONLY)
            var buf = [UInt8](repeating: 0, count: 20_000)
            let got = read(fd, &buf, buf.count)
            close(fd)
            unlink(path)
            out.append(Array(buf[0..<max(0, got)]))
        }
    }
    return out
}
