#if canImport(Glibc)
import Glibc
#endif

/// Whether a WAV or AIFF file is shorter than its header says. libsndfile
/// plays such a file to where it ends and says nothing (its log has
/// "data : 3528000 (should be 1763978)"), so a recording a server cut in
/// half would be stored as a sound half as long. FLAC's decoder reports it
/// itself; MP3 and Ogg have no length to compare.
enum ContainerLength {
    /// The audio bytes the header of the file at `path` announces and the
    /// bytes there are, when it announces more than there are; nil when it
    /// does not, or says no length (a stream's 0 or 0xFFFFFFFF), or is no
    /// RIFF WAVE or AIFF file. Reads the first 64 KiB at most; opens and
    /// closes its descriptor itself (it runs on the check's quiet thread).
    static func shortfall(ofFileAt path: String) -> (announced: Int64, present: Int64)? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return nil }
        var head = [UInt8](repeating: 0, count: 64 << 10)
        let count = head.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count >= 12 else { return nil }
        return shortfall(head: Array(head.prefix(count)), fileSize: Int64(status.st_size))
    }

    /// `shortfall` for a file of `fileSize` bytes that begins with `head`.
    static func shortfall(head: [UInt8], fileSize: Int64) -> (announced: Int64, present: Int64)? {
        func text(_ offset: Int) -> String { String(decoding: head[offset..<offset + 4], as: UTF8.self) }
        func number(_ offset: Int, bigEndian: Bool) -> Int64 {
            let bytes = head[offset..<offset + 4].map(Int64.init)
            return bigEndian ? bytes.reduce(0) { $0 << 8 | $1 } : bytes.reversed().reduce(0) { $0 << 8 | $1 }
        }
        guard head.count >= 12 else { return nil }
        let bigEndian: Bool
        let audioChunk: String
        switch (text(0), text(8)) {
        case ("RIFF", "WAVE"): (bigEndian, audioChunk) = (false, "data")
        case ("RIFX", "WAVE"): (bigEndian, audioChunk) = (true, "data")
        case ("FORM", "AIFF"), ("FORM", "AIFC"): (bigEndian, audioChunk) = (true, "SSND")
        default: return nil
        }
        // Chunks follow the 12-byte header: a name, a length, the bytes (padded to an even length).
        var offset = 12
        while offset + 8 <= head.count {
            let size = number(offset + 4, bigEndian: bigEndian)
            if text(offset) == audioChunk {
                guard size != 0, size != 0xFFFF_FFFF else { return nil }
                let present = fileSize - Int64(offset + 8)
                return size > present ? (size, max(0, present)) : nil
            }
            offset += 8 + Int(size) + Int(size & 1)
        }
        return nil
    }
}
