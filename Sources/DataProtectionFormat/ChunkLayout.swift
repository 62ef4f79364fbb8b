/// Pure offset maths for the chunked body of a protected file (FORMAT.md §4).
///
/// Plaintext is cut into chunks of `chunkSize` bytes; every chunk but the last
/// is full, the last holds 1…chunkSize bytes (0 only when the file is empty).
/// On disk each chunk is `nonce ‖ ciphertext ‖ tag`, so a full chunk takes
/// `stride = chunkSize + overhead` bytes after the header.
public struct ChunkLayout: Equatable, Sendable {
    /// Bytes before the first chunk.
    public let headerSize: Int
    /// Plaintext bytes in a full chunk.
    public let chunkSize: Int
    /// Bytes each chunk adds to its plaintext (nonce and tag).
    public let overhead: Int
    /// Bytes a full chunk takes on disk.
    public var stride: Int { chunkSize + overhead }

    /// The layout of a body after a header of `headerSize` bytes, with chunks of `chunkSize` plaintext bytes plus `overhead`.
    public init(headerSize: Int, chunkSize: Int, overhead: Int) {
        self.headerSize = headerSize
        self.chunkSize = chunkSize
        self.overhead = overhead
    }

    /// Largest plaintext a v1 file may hold: 2^48 bytes (256 TiB).
    public static let maxPlaintextSize: Int64 = 1 << 48

    /// Number of chunks for `size` plaintext bytes (at least one: an empty file has one empty chunk).
    public func chunkCount(forPlaintextSize size: Int64) -> Int64 {
        size == 0 ? 1 : (size + Int64(chunkSize) - 1) / Int64(chunkSize)
    }

    /// Bytes on disk for `size` plaintext bytes.
    public func fileSize(forPlaintextSize size: Int64) -> Int64 {
        Int64(headerSize) + size + chunkCount(forPlaintextSize: size) * Int64(overhead)
    }

    /// The plaintext size a file of `fileSize` bytes holds, or nil when no valid file has that size.
    ///
    /// Invalid sizes: shorter than a header plus one empty chunk; a trailing
    /// partial chunk that cannot even hold nonce and tag; a trailing chunk with
    /// zero plaintext bytes after full chunks (never written by a conforming writer).
    public func plaintextSize(forFileSize fileSize: Int64) -> Int64? {
        let body = fileSize - Int64(headerSize)
        guard body >= Int64(overhead) else { return nil }
        let full = body / Int64(stride)
        let rem = body % Int64(stride)
        if rem == 0 { return full * Int64(chunkSize) }
        guard rem >= Int64(overhead) else { return nil }
        if rem == Int64(overhead) && full > 0 { return nil }
        return full * Int64(chunkSize) + rem - Int64(overhead)
    }

    /// File offset where chunk `index` starts.
    public func offset(ofChunk index: Int64) -> Int64 { Int64(headerSize) + index * Int64(stride) }

    /// Plaintext bytes in chunk `index` of a file holding `size` bytes.
    public func plaintextLength(ofChunk index: Int64, plaintextSize size: Int64) -> Int {
        let start = index * Int64(chunkSize)
        return Int(max(0, min(Int64(chunkSize), size - start)))
    }

    /// The chunk holding plaintext byte `offset`.
    public func chunkIndex(containing offset: Int64) -> Int64 { offset / Int64(chunkSize) }
}
