// Sequentially consistent atomics on words that other threads, or (mapped shared) other processes, touch.
//
// The bodies are `@inlinable`, so a caller's optimised build calls the C shim directly, exactly as it did when it
// imported `CShims` itself: no wrapper frame on the chunk pipeline's hand-off or the live lock's per-operation check.
// They are `public`, not `package`: Swift 6.1 does not specialise a `package` generic across modules (measured: the
// callers then called the unspecialised `AtomicWord.load` through a witness table). SystemLayer is no product, so
// `public` here reaches only this package's modules.
public import CShims  // only for the @inlinable bodies below (no C type in any signature); clients still cannot name dp_* without importing CShims

/// A word accessed only atomically (sequentially consistent). `AtomicWord32` adds a process-private futex to sleep
/// on; `AtomicWord64`, on a `SharedPage`, is seen by other processes too.
///
/// The word lives wherever `address` points (the caller owns the memory); this is a typed view, free to copy.
@frozen
public struct AtomicWord<Value: AtomicWordValue> {
    public let address: UnsafeMutablePointer<Value>

    @inlinable @inline(__always)
    public init(_ address: UnsafeMutablePointer<Value>) { self.address = address }

    @inlinable @inline(__always)
    public func load() -> Value { Value.atomicLoad(address) }

    @inlinable @inline(__always)
    public func store(_ value: Value) { Value.atomicStore(address, value) }

    /// Sets the word to `desired` if it holds `expected`; whether it did.
    @inlinable @inline(__always)
    public func compareExchange(expected: Value, desired: Value) -> Bool { Value.atomicCompareExchange(address, expected, desired) }

    /// Adds `value` (wrapping) and returns the previous value.
    @inlinable @inline(__always) @discardableResult
    public func fetchAdd(_ value: Value) -> Value { Value.atomicFetchAdd(address, value) }
}

public typealias AtomicWord32 = AtomicWord<UInt32>
public typealias AtomicWord64 = AtomicWord<UInt64>

extension AtomicWord where Value == UInt32 {
    /// `futex(FUTEX_WAIT_PRIVATE)`: sleeps while the word holds `expected` (returns at once if it does not), until a
    /// wake-up or a signal. Callers re-check the word: a return says nothing about its value.
    @inlinable @inline(__always)
    public func wait(whileEqualTo expected: UInt32) { dp_futex_wait(address, expected) }

    /// `futex(FUTEX_WAKE_PRIVATE)`: wakes every thread of this process asleep on the word.
    @inlinable @inline(__always)
    public func wakeAll() { dp_futex_wake_all(address) }
}

extension AtomicWord where Value == UInt64 {
    /// ORs `mask` in and returns the previous value.
    @inlinable @inline(__always) @discardableResult
    public func fetchOr(_ mask: UInt64) -> UInt64 { dp_atomic_fetch_or_u64(address, mask) }

    /// ANDs `mask` in and returns the previous value.
    @inlinable @inline(__always) @discardableResult
    public func fetchAnd(_ mask: UInt64) -> UInt64 { dp_atomic_fetch_and_u64(address, mask) }
}

/// A word size the C shims have atomics for (32 and 64 bits).
public protocol AtomicWordValue: FixedWidthInteger {
    static func atomicLoad(_ p: UnsafeMutablePointer<Self>) -> Self
    static func atomicStore(_ p: UnsafeMutablePointer<Self>, _ v: Self)
    static func atomicCompareExchange(_ p: UnsafeMutablePointer<Self>, _ expected: Self, _ desired: Self) -> Bool
    static func atomicFetchAdd(_ p: UnsafeMutablePointer<Self>, _ v: Self) -> Self
}

extension UInt32: AtomicWordValue {
    @inlinable @inline(__always) public static func atomicLoad(_ p: UnsafeMutablePointer<Self>) -> Self { dp_atomic_load_u32(p) }
    @inlinable @inline(__always) public static func atomicStore(_ p: UnsafeMutablePointer<Self>, _ v: Self) { dp_atomic_store_u32(p, v) }
    @inlinable @inline(__always) public static func atomicCompareExchange(_ p: UnsafeMutablePointer<Self>, _ e: Self, _ d: Self) -> Bool { dp_atomic_cas_u32(p, e, d) != 0 }
    @inlinable @inline(__always) public static func atomicFetchAdd(_ p: UnsafeMutablePointer<Self>, _ v: Self) -> Self { dp_atomic_fetch_add_u32(p, v) }
}

extension UInt64: AtomicWordValue {
    @inlinable @inline(__always) public static func atomicLoad(_ p: UnsafeMutablePointer<Self>) -> Self { dp_atomic_load_u64(p) }
    @inlinable @inline(__always) public static func atomicStore(_ p: UnsafeMutablePointer<Self>, _ v: Self) { dp_atomic_store_u64(p, v) }
    @inlinable @inline(__always) public static func atomicCompareExchange(_ p: UnsafeMutablePointer<Self>, _ e: Self, _ d: Self) -> Bool { dp_atomic_cas_u64(p, e, d) != 0 }
    @inlinable @inline(__always) public static func atomicFetchAdd(_ p: UnsafeMutablePointer<Self>, _ v: Self) -> Self { dp_atomic_fetch_add_u64(p, v) }
}
