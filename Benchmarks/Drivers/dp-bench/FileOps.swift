// One file operation per process, on protected files of the domain that dpctl uses (same environment:
// DATAPROTECTION_HOME, DATAPROTECTION_DEVICE_DIR, DATAPROTECTION_KEYRING), class complete, no fsync.
// Benchmarks/compare times these whole processes beside the same operations on plain files and on a
// gocryptfs mount (Benchmarks/compare-tools/fileops.c, same arguments, same offsets).
import DataProtection
import Foundation

func fileOps(_ argv: [String]) throws {
    guard argv.count == 3, let number = Int(argv[2]), number > 0 else { usage() }
    let files = try ProtectionDomain.open(
        at: try DomainLocation.resolve(environment: ProcessInfo.processInfo.environment),
        keyStore: .kernel(try KeyringParent.from(environment: ProcessInfo.processInfo.environment))
    ).files
    let path = argv[1]
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 64)
    defer { buffer.deallocate() }
    for i in 0..<buffer.count { buffer[i] = UInt8(truncatingIfNeeded: i &* 31) }
    let block = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<4096])

    switch argv[0] {
    case "seq-write":  // PATH MIB: a new file, MIB calls of 1 MiB
        let h = try files.create(path, protection: .complete)
        for i in 0..<number { try h.write(UnsafeRawBufferPointer(buffer), at: Int64(i) << 20) }
        h.close()
    case "seq-read":  // PATH MIB: the whole file in 1 MiB calls; MIB is checked
        let h = try files.open(path)
        var offset: Int64 = 0
        while case let n = try h.read(into: buffer, at: offset), n > 0 { offset += Int64(n) }
        h.close()
        guard offset == Int64(number) << 20 else { throw ProtectionError(.io(EIO), "read \(offset) bytes of \(number) MiB from '\(path)'") }
    case "small-write":  // DIR N: N new 4 KiB files DIR/0 … DIR/N-1, create+write+close
        for i in 0..<number {
            let h = try files.create("\(path)/\(i)", protection: .complete)
            try h.write(UnsafeRawBufferPointer(block), at: 0)
            h.close()
        }
    case "small-put":  // DIR N: N new 4 KiB files DIR/0 … DIR/N-1, each one whole-file write (atomic replace, durable)
        for i in 0..<number { try files.write(UnsafeRawBufferPointer(block), to: "\(path)/\(i)", protection: .complete) }
    case "small-read":  // DIR N: open+read+close of DIR/0 … DIR/N-1
        for i in 0..<number {
            let h = try files.open("\(path)/\(i)")
            guard try h.read(into: buffer, at: 0) == 4096 else { throw ProtectionError(.io(EIO), "short read of '\(path)/\(i)'") }
            h.close()
        }
    case "random-read":  // PATH OPS: OPS reads of 4 KiB at 4 KiB-aligned offsets (fixed seed, as fileops.c)
        let h = try files.open(path)
        var offsets = RandomBlockOffsets(blocks: UInt64(try h.size / 4096))
        for _ in 0..<number {
            guard try h.read(into: block, at: offsets.next()) == 4096 else { throw ProtectionError(.io(EIO), "short random read of '\(path)'") }
        }
        h.close()
    default: usage()
    }
}

/// 4 KiB-aligned offsets below `blocks` × 4 KiB from a 64-bit LCG with a fixed seed: the sequence fileops.c draws.
struct RandomBlockOffsets {
    let blocks: UInt64
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15

    mutating func next() -> Int64 {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return Int64((state >> 33) % blocks) * 4096
    }
}
