// libFuzzer target: the chunk decoder. The input's first byte picks one of the valid
// seed files; the rest is XORed over that file's body, so mutants keep a valid header
// and exercise chunk lengths, nonces, tags, the last-chunk flag and size arithmetic.
import CFuzz
import DataProtection
import FuzzHarnesses

nonisolated(unsafe) let keys = try! fuzzKeys()
nonisolated(unsafe) let seeds: [[UInt8]] = try! makeSeedFiles(keys)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzChunks(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    var file = seeds[Int(data[0]) % seeds.count]
    let mask = UnsafeBufferPointer(start: data + 1, count: size - 1)
    // Bytes past the seed's end extend the file; the XOR covers the body after the 176-byte header.
    if 176 + mask.count > file.count { file += [UInt8](repeating: 0, count: 176 + mask.count - file.count) }
    for (i, m) in mask.enumerated() { file[176 + i] ^= m }
    if case .success(let plain) = openAndRead(file, keys: keys), mask.allSatisfy({ $0 == 0 }) == false {
        // A changed body must never authenticate.
        preconditionFailure("a modified file authenticated (\(plain.count) bytes)")
    }
    return 0
}

/// SwiftPM links executables with `main` aliased to `FuzzChunks_main`; hand control to libFuzzer.
@_cdecl("FuzzChunks_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var c = argc
    var v = argv
    return LLVMFuzzerRunDriver(&c, &v) { data, size in fuzzChunks(data!, size) }
}
