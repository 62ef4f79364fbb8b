internal import CSodium
import Locking

/// A pool of small locked-memory slots for `SecretBytes`.
///
/// `sodium_malloc` maps fresh pages with guard pages and `mlock`s them on every
/// call; here that costs about 28 µs per allocate-and-free pair, and a file open
/// needs several secrets. The pool instead carves fixed-size slots (32 to 1024
/// bytes) out of 64 KiB arenas that themselves come from `sodium_malloc`, so
/// the arenas are locked in memory, excluded from core dumps and surrounded by
/// guard pages; a slot is zeroed (`sodium_memzero`) when its secret ends, before
/// it is reused. What is lost against one `sodium_malloc` per secret: no guard
/// page between two secrets of the same arena. `SecretBytes` never hands out a
/// pointer beyond its own bytes, so that matters only for memory-safety bugs in
/// C code handed such a pointer. Arenas are kept for the life of the process.
enum SecurePool {
    static let classes = [32, 64, 128, 256, 512, 1024]
    static let arenaBytes = 64 * 1024

    private struct FreeLists: ~Copyable {
        var free: [[UInt]] = Array(repeating: [], count: SecurePool.classes.count)  // slot addresses
    }

    // The pool is process-wide state by nature: one set of locked pages shared by every secret.
    private static let lists = Locked(FreeLists())

    /// The slot class for `count` bytes, or nil when it is too large for the pool.
    @inline(__always)
    static func slotClass(for count: Int) -> Int? {
        for (i, size) in classes.enumerated() where count <= size { return i }
        return nil
    }

    /// A zeroed slot of class `c`, or nil if no arena could be allocated.
    static func allocate(_ c: Int) -> UnsafeMutableRawPointer? {
        let address: UInt? = lists.withLock { l -> UInt? in
            if l.free[c].isEmpty {
                let size = classes[c]
                guard let arena = sodium_malloc(arenaBytes) else { return nil }
                sodium_memzero(arena, arenaBytes)
                // sodium_malloc aligns the end of the block; align slots inside it.
                let start = (UInt(bitPattern: arena) + 63) & ~UInt(63)
                let usable = arenaBytes - Int(start - UInt(bitPattern: arena))
                for k in stride(from: usable / size - 1, through: 0, by: -1) { l.free[c].append(start + UInt(k * size)) }
            }
            return l.free[c].popLast()
        }
        return address.flatMap { UnsafeMutableRawPointer(bitPattern: $0) }
    }

    /// Zeroes the slot and returns it to the pool.
    static func release(_ p: UnsafeMutableRawPointer, _ c: Int) {
        sodium_memzero(p, classes[c])
        let address = UInt(bitPattern: p)
        lists.withLock { $0.free[c].append(address) }
    }
}
