// The one clock every deadline uses.
import Dispatch

/// Monotonic time in nanoseconds, the clock every deadline uses.
func monotonicNow() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

extension Duration {
    /// The duration in whole nanoseconds, saturating.
    var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        let (product, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? UInt64.max / 2 : product + UInt64(attoseconds / 1_000_000_000)
    }
}
