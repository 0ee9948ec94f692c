#if canImport(Glibc)
import Glibc
#endif

/// A file read from its start, once, through a buffer: bytes, numbers and
/// skips that report the file's end. Owns its descriptor (`close`).
struct FileReader {
    private let descriptor: Int32
    private var buffer: [UInt8]
    private var start: Int64 = 0
    private var count = 0
    private var index = 0
    /// The offset of the next byte.
    var position: Int64 { start + Int64(index) }
    /// Whether a read failed (an I/O error, not the file's end).
    private(set) var failed = false

    init?(path: String, bufferSize: Int = 64 << 10) {
        descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        buffer = [UInt8](repeating: 0, count: bufferSize)
    }

    func close() { _ = Glibc.close(descriptor) }

    /// Goes to `offset` (where a TIFF's directory or table is): the next
    /// read starts there, whatever was read before.
    mutating func seek(to offset: Int64) {
        (start, count, index) = (offset, 0, 0)
    }

    /// Reads the next bufferful at `position`; false at the file's end, or
    /// when the read fails (`failed`).
    private mutating func refill() -> Bool {
        let next = position
        var read: Int
        repeat {
            read = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(next)) }
        } while read < 0 && errno == EINTR
        if read < 0 { failed = true }
        guard read > 0 else { return false }
        (start, count, index) = (next, read, 0)
        return true
    }

    mutating func byte() -> UInt8? {
        if index == count, !refill() { return nil }
        defer { index += 1 }
        return buffer[index]
    }

    /// A number of `width` bytes.
    mutating func number(_ width: Int, bigEndian: Bool) -> Int64? {
        var value: Int64 = 0
        for shift in 0..<width {
            guard let byte = byte() else { return nil }
            value = bigEndian ? value << 8 | Int64(byte) : value | Int64(byte) << (8 * shift)
        }
        return value
    }

    /// Hands the next `count` bytes to `each`, a bufferful at a time;
    /// false when the file ends before (or a read fails).
    mutating func bytes(_ count: Int, _ each: (ArraySlice<UInt8>) -> Void) -> Bool {
        var left = count
        while left > 0 {
            if index == self.count, !refill() { return false }
            let part = min(left, self.count - index)
            each(buffer[index..<index + part])
            index += part
            left -= part
        }
        return true
    }

    /// Four bytes as text: a chunk's name (`fmt `, `data`).
    mutating func fourCharacters() -> String? {
        var name: [UInt8] = []
        while name.count < 4, let byte = byte() { name.append(byte) }
        return name.count == 4 ? String(decoding: name, as: UTF8.self) : nil
    }

    /// Moves `length` bytes on: false when the file ends before.
    mutating func skip(_ length: Int64) -> Bool {
        guard length >= 0, length <= Int64.max - position else { return false }
        let target = position + length
        if target <= start + Int64(count) {
            index = Int(target - start)
            return true
        }
        (start, count, index) = (target, 0, 0)
        // The last byte skipped must be there.
        var last: UInt8 = 0
        var read: Int
        repeat { read = pread(descriptor, &last, 1, off_t(target - 1)) } while read < 0 && errno == EINTR
        if read < 0 { failed = true }
        return read == 1
    }

    /// Moves past a JPEG scan's entropy-coded bytes, to the 0xFF of the
    /// next marker (not a stuffed 0xFF 0x00, nor a restart marker): false
    /// when the file ends before one.
    mutating func skipEntropyCodedBytes() -> Bool {
        while true {
            if index == count, !refill() { return false }
            let found = buffer.withUnsafeBytes { bytes -> Int? in
                guard let base = bytes.baseAddress,
                      let hit = memchr(base + index, 0xFF, count - index) else { return nil }
                return base.distance(to: UnsafeRawPointer(hit))
            }
            guard let at = found else {
                index = count
                continue
            }
            index = at + 1
            guard let next = byte() else { return false }
            if next == 0x00 || (0xD0...0xD7).contains(next) { continue }
            // A marker: step back to its 0xFF (the byte before `next`, perhaps in the last bufferful).
            if index >= 2 {
                index -= 2
            } else {
                let markerAt = position - 2
                (start, count, index) = (markerAt, 0, 0)
            }
            return true
        }
    }
}
