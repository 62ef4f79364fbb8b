import DataProtectionFormat

/// This release of swift-data-protection and the on-disk formats it writes.
///
/// The version follows semantic versioning (CHANGELOG.md lists what each
/// release changed). Before 1.0 a minor version may change the public API;
/// from 1.0 on only a major version does. The formats are a separate promise:
/// every release reads every file, keybag and journal version any earlier
/// release wrote (FORMAT.md), and writes the newest.
public enum DataProtectionRelease {
    /// The library's version, as `dpctl --version` prints it.
    public static let version = "0.2.0"

    /// The protected-file format version new files are written in (FORMAT.md §3).
    public static var fileFormat: UInt8 { FileHeader.currentVersion }
    /// The protected-file format versions this release reads.
    public static var readableFileFormats: ClosedRange<UInt8> { FileHeader.readableVersions }
    /// The newest keybag format version written (FORMAT.md §12): a TPM-bound keybag's.
    public static var keybagFormat: UInt8 { KeybagContents.version }
    /// The keybag format version written for a domain bound by its device secret file alone (unchanged since 0.2.0).
    public static var unboundKeybagFormat: UInt8 { KeybagContents.unboundVersion }
    /// The rollback journal format version written (FORMAT.md §6.7).
    public static var journalFormat: UInt8 { JournalFormat.version }

    /// One line for `--version`: the release and the formats it writes.
    public static var summary: String {
        "\(version) (file format \(fileFormat), reads \(readableFileFormats.lowerBound)–\(readableFileFormats.upperBound); keybag format \(unboundKeybagFormat), \(keybagFormat) when TPM-bound; journal format \(journalFormat))"
    }
}
