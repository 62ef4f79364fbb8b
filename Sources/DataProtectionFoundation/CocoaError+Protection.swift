// Errors as Apple reports them: each ProtectionError becomes the CocoaError iOS gives for the same failure, with the
// ProtectionError itself as the underlying error (NSUnderlyingErrorKey), so ported `catch CocoaError.fileReadNoPermission`
// code keeps working and the library's message (what is locked, the command that fixes it) stays reachable.
import DataProtection
import Foundation

#if canImport(Glibc)
import Glibc
#endif

extension CocoaError {
    /// The CocoaError iOS reports for `error` while reading (or, when `writing`, writing) `url`.
    ///
    /// A locked class is `.fileReadNoPermission` / `.fileWriteNoPermission`, as iOS reports a protected file while
    /// the device is locked; the localized description is the library's message, which names the fix.
    public init(_ error: ProtectionError, writing: Bool, url: URL? = nil) {
        var info: [String: Any] = [NSUnderlyingErrorKey: error, NSLocalizedDescriptionKey: error.message]
        if let url { info[NSURLErrorKey] = url; info[NSFilePathErrorKey] = url.path } else if let p = error.path { info[NSFilePathErrorKey] = p }
        self.init(Self.code(for: error.code, writing: writing), userInfo: info)
    }

    /// The library's error underneath, when this error came from a protected file.
    public var protectionError: ProtectionError? { userInfo[NSUnderlyingErrorKey] as? ProtectionError }

    /// Apple's code for a ProtectionError code.
    static func code(for code: ProtectionError.Code, writing: Bool) -> CocoaError.Code {
        let noPermission: CocoaError.Code = writing ? .fileWriteNoPermission : .fileReadNoPermission
        let unknown: CocoaError.Code = writing ? .fileWriteUnknown : .fileReadUnknown
        switch code {
        // Locked, outside the sandbox, a read-only directory, a file that is not ours: iOS says "no permission".
        case .locked, .escapesContainer, .readOnly, .insecurePermissions, .untrustedFile: return noPermission
        case .notFound: return writing ? .fileNoSuchFile : .fileReadNoSuchFile
        case .alreadyExists: return .fileWriteFileExists
        case .invalidArgument: return writing ? .fileWriteInvalidFileName : .fileReadInvalidFileName
        // A sealed-bundle resource that does not match its seal reads as a damaged file.
        case .authenticationFailed, .corruptHeader, .notProtected, .unsupportedVersion, .unsupportedFeature, .unsupportedCipher, .bundleTampered:
            return writing ? unknown : .fileReadCorruptFile
        case .fileTooLarge: return writing ? unknown : .fileReadTooLarge
        case .io(let e):
            switch e {
            case EACCES, EPERM: return noPermission
            case ENOENT, ENOTDIR: return writing ? .fileNoSuchFile : .fileReadNoSuchFile
            case EEXIST: return .fileWriteFileExists
            case ENOSPC, EDQUOT: return writing ? .fileWriteOutOfSpace : unknown
            case EROFS: return writing ? .fileWriteVolumeReadOnly : unknown
            case ENAMETOOLONG: return writing ? .fileWriteInvalidFileName : .fileReadInvalidFileName
            case EFBIG: return writing ? unknown : .fileReadTooLarge
            default: return unknown
            }
        default: return unknown  // keybag, keyring, TPM, coordination, handle: no Foundation counterpart
        }
    }
}
