// libFuzzer target: protected-file headers. The input is taken as a whole file; most
// mutants die in the header checks (magic, version, flags, lengths, key wrap, MAC).
import CFuzz
#if canImport(Glibc)
import Glibc
#endif
import DataProtection
import FuzzHarnesses
import FuzzSupport

nonisolated(unsafe) let keys = try! fuzzKeys()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHeader(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    _ = openAndRead(bytes, keys: keys)
    _ = readInfo(bytes, keys: keys)
    return 0
}

/// SwiftPM links executables with `main` aliased to `FuzzHeader_main`; hand control to libFuzzer.
@_cdecl("FuzzHeader_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    // `FuzzHeader --write-seeds DIR` writes valid files (under the fuzz keys) as a seed corpus.
    if argc == 3, let a = argv?[1], String(cString: a) == "--write-seeds", let d = argv?[2] {
        for (i, seed) in (try! makeSeedFiles(keys)).enumerated() { writeSeed(seed, to: "\(String(cString: d))/seed-\(i).dpf") }
        return 0
    }
    var c = argc
    var v = argv
    return LLVMFuzzerRunDriver(&c, &v) { data, size in fuzzHeader(data!, size) }
}
