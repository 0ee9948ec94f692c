/// Whether a sound file that libsndfile does not open is laid out whole,
/// as its container has it. libsndfile 1.2 leaves whole files of its own
/// containers unopened: a BW64 file (RF64 by another name), a WAV with
/// two `data` chunks or its `fmt ` chunk after its `data`, a CAF written
/// to a pipe (its `data` chunk's length -1, "to the end"), FLAC in Ogg.
/// Such a file shows no damage, and is stored as it came; one whose
/// layout runs off its end, or breaks off, is still refused.
enum ContainerLayout {
    /// True where the file `head` was read from is a WAVE (RIFF, RIFX,
    /// RF64 or BW64), AIFF or AIFF-C, CAF or Ogg file whose layout is
    /// whole: its chunks, with the ones that hold its format and its audio
    /// among them, end where the container says it ends (a WAVE's or
    /// AIFF's own length, a CAF's file end); an Ogg stream's pages follow
    /// each other to the file's end, each with its checksum right, and every
    /// logical stream in it begins and ends. False for any other file.
    static func isWhole(_ head: ContainerLength.Head) -> Bool {
        let bytes = head.bytes
        func text(_ offset: Int) -> String? {
            offset + 4 <= bytes.count ? String(decoding: bytes[offset..<offset + 4], as: UTF8.self) : nil
        }
        guard var reader = FileReader(path: head.path) else { return false }
        defer { reader.close() }
        switch (text(0), text(8)) {
        case ("RIFF", "WAVE"), ("RIFX", "WAVE"), ("RF64", "WAVE"), ("BW64", "WAVE"):
            return waveIsWhole(&reader, size: head.size, bigEndian: text(0) == "RIFX", ds64: text(12) == "ds64")
        case ("FORM", "AIFF"), ("FORM", "AIFC"):
            return chunksAreWhole(&reader, size: head.size, bigEndian: true, needed: ["COMM", "SSND"]) { _, size in size }
        default:
            break
        }
        switch text(0) {
        case "caff": return cafIsWhole(&reader, size: head.size)
        case "OggS": return OggPages(path: head.path, size: head.size)?.ending == .whole
        default: return false
        }
    }

    /// A WAVE file's chunks, after its 12-byte header, up to the end its
    /// header gives (RF64's and BW64's in their `ds64` chunk, which also
    /// holds the `data` chunk's length).
    private static func waveIsWhole(_ reader: inout FileReader, size: Int64, bigEndian: Bool, ds64: Bool) -> Bool {
        guard reader.skip(4), let length = reader.number(4, bigEndian: bigEndian), reader.skip(4) else { return false }
        if length == 0xFFFF_FFFF, ds64, reader.skip(4) {
            // RF64 and BW64: the lengths of the whole and of the data, 64 bits each, in the `ds64` chunk that comes first.
            guard let stated = reader.number(4, bigEndian: false), stated >= 16,
                  let whole = reader.number(8, bigEndian: false), let data = reader.number(8, bigEndian: false),
                  whole > 0, data >= 0, reader.skip(stated - 16 + stated & 1) else { return false }
            return chunksAreWhole(&reader, size: size, end: 8 + whole, bigEndian: false, needed: ["fmt ", "data"]) { name, length in
                name == "data" && length == 0xFFFF_FFFF ? data : length
            }
        }
        // A length a writer left as a placeholder (it wrote to a pipe) says "to the end of the file".
        let placeholder = length == 0 || length == 0xFFFF_FFFF
        return chunksAreWhole(&reader, size: size, end: placeholder ? size : 8 + length, bigEndian: bigEndian,
                              needed: ["fmt ", "data"]) { name, length in
            name == "data" && (length == 0 || length == 0xFFFF_FFFF) ? nil : length
        }
    }

    /// Walks RIFF-style chunks (a 4-letter name, a 32-bit length, the bytes,
    /// a pad byte after an odd length) from the reader's position to `end`
    /// (the file's `size` unless given): whole when the last chunk ends
    /// there (its pad byte may be missing at the file's end), inside the
    /// file, and every name in `needed` was met. `length` gives a chunk's
    /// real length from its name and stated length, nil for "to the end".
    private static func chunksAreWhole(_ reader: inout FileReader, size: Int64, end: Int64? = nil, bigEndian: Bool,
                                       needed: Set<String>, length: (String, Int64) -> Int64?) -> Bool {
        let end = end ?? size
        guard end <= size else { return false } // the container says there is more than arrived
        var missing = needed
        while reader.position < end {
            guard end - reader.position >= 8, let name = reader.fourCharacters(),
                  let stated = reader.number(4, bigEndian: bigEndian) else { return false }
            missing.remove(name)
            guard let chunk = length(name, stated) else { return missing.isEmpty }
            let padded = chunk + chunk & 1
            if reader.position + chunk == end { return missing.isEmpty } // the last chunk, its pad byte left out
            guard reader.position + padded <= end, reader.skip(padded) else { return false }
        }
        return reader.position == end && missing.isEmpty
    }

    /// A CAF file's chunks (a 4-letter type and a signed 64-bit length),
    /// after its 8-byte header (`caff`, version 1): `desc` first, `data`
    /// among them (its length -1 where it runs to the file's end, as a
    /// writer to a pipe leaves it), the last ending with the file. Linear
    /// PCM must fill whole packets.
    private static func cafIsWhole(_ reader: inout FileReader, size: Int64) -> Bool {
        guard reader.skip(4), reader.number(2, bigEndian: true) == 1, reader.skip(2) else { return false }
        var bytesPerPacket: Int64 = 0
        var sawData = false
        var first = true
        while reader.position < size {
            guard size - reader.position >= 12, let type = reader.fourCharacters(),
                  let length = reader.number(8, bigEndian: true) else { return false }
            guard !first || type == "desc" else { return false }
            first = false
            if type == "desc" {
                // Sample rate (8), format ("lpcm"...), flags, bytes per packet, then the rest.
                guard length >= 32, reader.skip(8), let format = reader.fourCharacters(), reader.skip(4),
                      let packet = reader.number(4, bigEndian: true), reader.skip(length - 20) else { return false }
                if format == "lpcm" { bytesPerPacket = packet }
                continue
            }
            if type == "data" {
                sawData = true
                // Its first 4 bytes count edits; the audio follows.
                let audio = (length == -1 ? size - reader.position : length) - 4
                guard audio >= 0, bytesPerPacket == 0 || audio % bytesPerPacket == 0 else { return false }
                if length == -1 { return true }
            }
            guard length >= 0, length <= size - reader.position, reader.skip(length) else { return false }
        }
        return sawData && reader.position == size
    }
}
