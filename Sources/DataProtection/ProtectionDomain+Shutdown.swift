// A domain's end in this process: its keys retired (a service's graceful shutdown, DataProtectionService).
import DataProtectionKeys

extension ProtectionDomain {
    /// Retires this domain's keys in this process for good: no new open, create or key fetch is admitted
    /// (`.shuttingDown`), every open handle finishes its operation, commits and wipes its keys, and an explicit
    /// in-process key store (`KeyStore.inProcess`) drops its class keys.
    ///
    /// A kernel-keyring domain's class keys stay in the keyring for other processes: this process holds no copy of
    /// them (they are read from the keyring on each use). The domain stays unlocked for everyone else; this is not a
    /// lock (`lock` is), only this process leaving.
    /// - Returns: how many handles (and other key holders) were retired.
    @discardableResult
    public func retireKeys() -> Int {
        let retired = liveLock.retireKeys()
        (store as? ProcessKeyStore)?.wipeAll()
        return retired
    }
}
