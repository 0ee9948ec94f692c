import CSndFile
import Dispatch
import Foundation
import Glibc
@testable import MediaCheck
import SampleMedia
import Synchronization
import Testing
import TestSupport

@Suite struct SoundCheckTests {
    @Test(arguments: SoundFormat.allCases)
    func eachFormatDecodesWithItsFacts(_ format: SoundFormat) throws {
        try TemporaryDirectory.using { directory in
            let path = directory.appending("tone.\(format.rawValue)")
            try SampleSounds.write(format, to: path, seconds: 1.5, seed: 5, sampleRate: 22_050, channels: 2)
            let facts = try SoundCheck.facts(of: path)
            // WAV and AIFF hold their samples as they play: opened, not decoded (FLAC's encodings are PCM's names too).
            #expect(try SoundFile(reading: path).holdsPlainSamples == [.wav, .aiff].contains(format))
            #expect(facts.format == format.rawValue)
            #expect(facts.sampleRate == 22_050)
            #expect(facts.channels == 2)
            #expect(facts.frames == 33_075)
            #expect(facts.durationSeconds == 1.5)
        }
    }

    @Test func aCutOffFLACIsNoSoundAndSaysWhy() throws {
        try TemporaryDirectory.using { directory in
            let whole = directory.appending("whole.flac"), cut = directory.appending("cut.flac")
            try SampleSounds.write(.flac, to: whole, seconds: 2, seed: 6)
            let bytes = try #require(FileManager.default.contents(atPath: whole))
            try bytes.prefix(bytes.count * 6 / 10).write(to: URL(fileURLWithPath: cut))
            let error = try #require(throws: SoundFileError.self) { try SoundCheck.facts(of: cut) }
            // What decoded before the decoder lost sync: a second or so of the two.
            let seconds = try #require(error.decodedSeconds)
            #expect(seconds > 0.5 && seconds < 1.2, "\(error)")
            #expect(error == SoundFileError(description: "Error : flac decoder lost sync after \((seconds * 10).rounded() / 10) s of audio",
                                            stage: .decoding, decodedSeconds: seconds))
            #expect(error.provesDamage == (seconds >= 1))
        }
    }

    /// Other containers of plain samples say their length too: RF64 (in
    /// its `ds64` chunk), Wave64, AU and CAF (its `data` chunk's, which
    /// counts 4 bytes of edits) cut short are refused by it, as WAV is;
    /// whole, they are sounds. (Each was stored with what was there.)
    @Test(arguments: [("rf64", SF_FORMAT_RF64, 176_400), ("w64", SF_FORMAT_W64, 176_400), ("au", SF_FORMAT_AU, 176_400),
                      ("caf", SF_FORMAT_CAF, 176_404)])
    func otherContainersCutShortSayHowShort(_ name: String, _ major: Int, _ announced: Int) throws {
        try TemporaryDirectory.using { directory in
            let whole = directory.appending("whole.\(name)"), cut = directory.appending("cut.\(name)")
            try SampleSounds.write(sndfileFormat: Int32(major | SF_FORMAT_PCM_16), to: whole, seconds: 1, seed: 15)
            let bytes = try #require(FileManager.default.contents(atPath: whole))
            #expect(try SoundCheck.facts(of: whole).durationSeconds == 1.0, "\(name)")
            // (libsndfile opens a CAF cut by a little, not one cut in half: "malformed".)
            for length in name == "caf" ? [bytes.count - 101] : [bytes.count / 2, bytes.count - 101] {
                try bytes.prefix(length).write(to: URL(fileURLWithPath: cut))
                let error = try #require(throws: SoundFileError.self) { try SoundCheck.facts(of: cut) }
                #expect(error.stage == .length && error.description.hasPrefix("its header announces \(announced) bytes of audio, "),
                        "\(name) cut to \(length): \(error)")
            }
        }
    }

    /// A chunk before the audio that runs past the first 64 KiB (tags, a
    /// picture, an ALAC CAF's packet table) does not hide the audio's
    /// length: a WAV or CAF so laid out and cut short was stored as a
    /// shorter sound.
    @Test(arguments: [("wav", SF_FORMAT_WAV, 176_400), ("caf", SF_FORMAT_CAF, 176_404)])
    func aLongChunkBeforeTheAudioHidesNotItsLength(_ name: String, _ major: Int, _ announced: Int) throws {
        try TemporaryDirectory.using { directory in
            let source = directory.appending("source.\(name)"), cut = directory.appending("cut.\(name)")
            try SampleSounds.write(sndfileFormat: Int32(major | SF_FORMAT_PCM_16), to: source, seconds: 1, seed: 72)
            var bytes = [UInt8](try #require(FileManager.default.contents(atPath: source)))
            let filler = [UInt8](repeating: 0x20, count: 100_000)
            if name == "wav" {
                // A LIST chunk after `fmt ` (12 + 8 + 16 bytes in), and the RIFF length grown by it.
                let list = Array("LIST".utf8) + withUnsafeBytes(of: UInt32(filler.count).littleEndian, Array.init) + filler
                bytes.insert(contentsOf: list, at: 36)
                let length = UInt32(bytes.count - 8)
                bytes.replaceSubrange(4..<8, with: withUnsafeBytes(of: length.littleEndian, Array.init))
            } else {
                // A `free` chunk after `desc` (8 + 12 + 32 bytes in).
                bytes.insert(contentsOf: Array("free".utf8) + withUnsafeBytes(of: UInt64(filler.count).bigEndian, Array.init) + filler,
                             at: 52)
            }
            try Data(bytes).write(to: URL(fileURLWithPath: source))
            #expect(try SoundCheck.facts(of: source).durationSeconds == 1.0)
            try Data(bytes.prefix(bytes.count - 50_001)).write(to: URL(fileURLWithPath: cut))
            let error = try #require(throws: SoundFileError.self) { try SoundCheck.facts(of: cut) }
            #expect(error.stage == .length && error.description.hasPrefix("its header announces \(announced) bytes of audio, "),
                    "\(name): \(error)")
        }
    }

    /// A WAV whose header gives no length (0: a streaming writer's, never
    /// rewritten) holds its samples all the same: counted by their bytes,
    /// not refused as holding none.
    @Test func aWAVWithoutALengthIsCountedByItsBytes() throws {
        try TemporaryDirectory.using { directory in
            let whole = directory.appending("whole.wav"), stream = directory.appending("stream.wav")
            try SampleSounds.write(.wav, to: whole, seconds: 2, seed: 16)
            var bytes = [UInt8](try #require(FileManager.default.contents(atPath: whole)))
            let data = try #require((12..<200).first { bytes[$0..<$0 + 4].elementsEqual(Array("data".utf8)) })
            bytes.replaceSubrange(data + 4..<data + 8, with: [0, 0, 0, 0])
            try Data(bytes).write(to: URL(fileURLWithPath: stream))
            #expect(try #require(ContainerLength.Head(path: stream)?.audioData) == (nil, 352_800))
            let facts = try SoundCheck.facts(of: stream)
            #expect(facts.durationSeconds == 2.0 && facts.format == "wav")
        }
    }

    /// The lengths writers leave in a header they could not go back to (a
    /// stream, a pipe) say nothing: SoX's 0x7FFFF000 and GStreamer's
    /// 0x7FFF0000 in a WAV, ffmpeg's Int64.max in a Wave64. Such a whole
    /// file was refused as cut short.
    @Test func placeholderLengthsSayNothing() throws {
        let format = Array("fmt ".utf8) + le(UInt32(16)) + [1, 0, 2, 0] + le(UInt32(44_100)) + le(UInt32(176_400)) + [4, 0, 16, 0]
        for placeholder: UInt32 in [0x7FFF_F000, 0x7FFF_0000, 0x7FFF_FFFF, 0, 0xFFFF_FFFF] {
            let wav = Array("RIFF".utf8) + le(placeholder) + Array("WAVE".utf8) + format + Array("data".utf8) + le(placeholder)
                + [UInt8](repeating: 1, count: 1_000)
            #expect(ContainerLength.shortfall(head: wav, fileSize: Int64(wav.count)) == nil, "\(placeholder)")
        }
        let riffGUID: [UInt8] = [0x72, 0x69, 0x66, 0x66, 0x2E, 0x91, 0xCF, 0x11, 0xA5, 0xD6, 0x28, 0xDB, 0x04, 0xC1, 0x00, 0x00]
        let dataGUID: [UInt8] = Array("data".utf8) + [0xF3, 0xAC, 0xD3, 0x11, 0x8C, 0xD1, 0x00, 0xC0, 0x4F, 0x8E, 0xDB, 0x8A]
        for placeholder: UInt64 in [UInt64(Int64.max), UInt64.max, 0] {
            let w64 = riffGUID + le(placeholder) + [UInt8](repeating: 0, count: 16) + dataGUID + le(placeholder)
                + [UInt8](repeating: 1, count: 1_000)
            #expect(ContainerLength.shortfall(head: w64, fileSize: Int64(w64.count)) == nil, "\(placeholder)")
        }
        // A length written, and the file shorter: cut.
        let w64 = riffGUID + le(UInt64(0)) + [UInt8](repeating: 0, count: 16) + dataGUID + le(UInt64(24 + 5_000)) + [UInt8](repeating: 1, count: 1_000)
        #expect(ContainerLength.shortfall(head: w64, fileSize: Int64(w64.count))! == (5_000, 1_000))
    }

    /// Text that begins as a sound's header does ("ID3 tags explained",
    /// ".snd files") is no sound cut short: an ID3 header counts only as the
    /// standard has it, and other headers only where libsndfile reads the
    /// file as a sound.
    @Test func textThatBeginsLikeASoundsHeaderIsNoSoundCutShort() throws {
        try TemporaryDirectory.using { directory in
            for text in ["ID3 tags explained\n", ".snd files: Sun audio format notes\n"] {
                let path = directory.appending("notes")
                try Data(text.utf8).write(to: URL(fileURLWithPath: path))
                let error = try #require(throws: SoundFileError.self) { try SoundCheck.facts(of: path) }
                #expect(error.stage == .opening && !error.provesDamage, "\(text): \(error)")
            }
        }
    }

    /// A file in a format libsndfile knows holding what it does not decode
    /// (32-bit FLAC: "unimplemented format") shows no damage: not refused.
    @Test func whatLibsndfileDoesNotImplementIsNoDamage() throws {
        try TemporaryDirectory.using { directory in
            let path = directory.appending("true32.flac")
            try Data(SampleSounds.flac32BitHeader).write(to: URL(fileURLWithPath: path))
            let error = try #require(throws: SoundFileError.self) { try SoundCheck.facts(of: path) }
            #expect(error.stage == .opening && error.unsupported, "\(error)")
            #expect(!error.provesDamage)
        }
    }

    /// Whole sounds in libsndfile's own containers, laid out as it does not
    /// open them (BW64, a WAV with two `data` chunks or its `fmt ` chunk
    /// last, a CAF from a pipe, FLAC in Ogg), show no damage: not refused
    /// (`unsupported`), as an M4A is not. Each was refused at a sound's URL.
    /// Cut anywhere, their layout breaks off: refused as before (a piped CAF
    /// cut between two frames cannot be told from a whole one).
    @Test(arguments: UnopenedLayout.allCases)
    func aWholeLayoutLibsndfileDoesNotOpenIsNoDamage(_ layout: UnopenedLayout) throws {
        try TemporaryDirectory.using { directory in
            let whole = directory.appending("whole.\(layout.fileExtension)"), cut = directory.appending("cut.\(layout.fileExtension)")
            try layout.write(to: whole, seconds: 1, seed: 61)
            #expect(ContainerLayout.verdict(try #require(ContainerLength.Head(path: whole))) == .whole, "\(layout)")
            let error = try #require(throws: SoundFileError.self) { try SoundCheck.facts(of: whole) }
            #expect(error.stage == .opening && error.unsupported && !error.provesDamage, "\(layout): \(error)")

            let bytes = try #require(FileManager.default.contents(atPath: whole))
            // Cuts throughout, and each of the last 64 bytes.
            let cuts = Array(stride(from: 0, to: bytes.count, by: 499)) + Array(bytes.count - 64..<bytes.count)
            for length in cuts where !(layout == .pipedCAF && (bytes.count - length) % 4 == 0) {
                try bytes.prefix(length).write(to: URL(fileURLWithPath: cut))
                let verdict = ContainerLayout.verdict(try #require(ContainerLength.Head(path: cut)))
                // Cut inside its first 12 bytes, it is no container known: libsndfile's failure stands.
                #expect(verdict == .broken || (length < 12 && verdict == .unknown), "\(layout) cut to \(length) bytes: \(verdict)")
            }
            try bytes.prefix(bytes.count / 2 + 1).write(to: URL(fileURLWithPath: cut))
            let cutError = try #require(throws: SoundFileError.self) { try SoundCheck.facts(of: cut) }
            #expect(!cutError.unsupported, "\(layout): \(cutError)")
        }
    }

    /// An Ogg file cut short decodes to where it ends without a word from
    /// libsndfile (its header gives no length): its pages say it is cut
    /// inside a page, and a byte changed fails its page's checksum. Each
    /// was stored as a shorter sound. One that ends on a page's boundary,
    /// its last page missing, ends as a live stream's recording does: stored.
    @Test(arguments: [("ogg", SF_FORMAT_VORBIS, 44_100), ("opus", SF_FORMAT_OPUS, 48_000)])
    func anOggFileCutShortOrChangedProvesDamage(_ name: String, _ codec: Int, _ rate: Int) throws {
        try TemporaryDirectory.using { directory in
            let whole = directory.appending("whole.\(name)"), cut = directory.appending("cut.\(name)")
            try SampleSounds.write(sndfileFormat: Int32(SF_FORMAT_OGG | codec), to: whole, seconds: 3, seed: 64, sampleRate: rate)
            #expect(try SoundCheck.facts(of: whole).durationSeconds == 3.0)
            let bytes = [UInt8](try #require(FileManager.default.contents(atPath: whole)))
            let pages = (0..<bytes.count - 4).filter { bytes[$0..<$0 + 4].elementsEqual(Array("OggS".utf8)) }
            let lastPage = try #require(pages.last)
            for length in Array(stride(from: 1, to: bytes.count, by: 997)) + [lastPage + 1, bytes.count - 1] where length != lastPage {
                try Data(bytes.prefix(length)).write(to: URL(fileURLWithPath: cut))
                let error = try #require(throws: SoundFileError.self, "\(name) cut to \(length)") { try SoundCheck.facts(of: cut) }
                // Cut inside its headers, libsndfile does not open it (at a sound's URL, that is refused too).
                #expect(error.provesDamage || error.stage == .opening, "\(name) cut to \(length): \(error)")
                if length > pages[3] {
                    #expect(error == SoundFileError(description: "it ends inside an Ogg page", stage: .length), "\(length)")
                }
            }
            // Without its last page, it ends as a recording of a live stream does: no damage shown.
            try Data(bytes.prefix(lastPage)).write(to: URL(fileURLWithPath: cut))
            #expect(try SoundCheck.facts(of: cut).durationSeconds < 3.0)
            var changed = bytes
            changed[pages[pages.count / 2] + 40] ^= 0x01
            try Data(changed).write(to: URL(fileURLWithPath: cut))
            let error = try #require(throws: SoundFileError.self) { try SoundCheck.facts(of: cut) }
            #expect(error == SoundFileError(description: "its Ogg page \(pages.count / 2 + 1) fails its checksum", stage: .integrity))
            #expect(error.provesDamage)
        }
    }

    /// A chained Ogg file (one recording after another, each its own
    /// stream) is counted to its end: libsndfile decodes the first link
    /// only, and its facts said 1 s of 3. Bytes after the streams' ends (a
    /// tag) are no damage.
    @Test(arguments: [(SF_FORMAT_VORBIS, 44_100), (SF_FORMAT_OPUS, 48_000), (SF_FORMAT_OPUS, 16_000)])
    func aChainedOggFileIsCountedToItsEnd(_ codec: Int, _ rate: Int) throws {
        try TemporaryDirectory.using { directory in
            let first = directory.appending("first.ogg"), second = directory.appending("second.ogg")
            let chained = directory.appending("chained.ogg")
            try SampleSounds.write(sndfileFormat: Int32(SF_FORMAT_OGG | codec), to: first, seconds: 1, seed: 65, sampleRate: rate)
            try SampleSounds.write(sndfileFormat: Int32(SF_FORMAT_OGG | codec), to: second, seconds: 2, seed: 66, sampleRate: rate)
            var bytes = try #require(FileManager.default.contents(atPath: first)) + #require(FileManager.default.contents(atPath: second))
            try bytes.write(to: URL(fileURLWithPath: chained))
            #expect(try SoundFile(reading: chained).decodeToEnd() == Int64(rate))
            #expect(try SoundCheck.facts(of: chained).durationSeconds == 3.0)
            bytes += Data("TAG".utf8) + Data(count: 125)
            try bytes.write(to: URL(fileURLWithPath: chained))
            #expect(try SoundCheck.facts(of: chained).durationSeconds == 3.0)
        }
    }

    /// The verdict on `bytes` written to a file.
    private func verdict(on bytes: [UInt8], in directory: TemporaryDirectory) throws -> ContainerLayout.Verdict {
        let path = directory.appending("layout-\(UInt32.random(in: 0...UInt32.max))")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return ContainerLayout.verdict(try #require(ContainerLength.Head(path: path)))
    }

    private func le(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.littleEndian, Array.init) }
    private func le(_ value: UInt64) -> [UInt8] { withUnsafeBytes(of: value.littleEndian, Array.init) }
    private func be(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.bigEndian, Array.init) }
    private func be(_ value: UInt64) -> [UInt8] { withUnsafeBytes(of: value.bigEndian, Array.init) }

    /// Lengths no file could hold (2^63 - 1, -1, -2^63) in a BW64's `ds64`
    /// or a CAF's chunks are judged without a trap (each took the whole run
    /// down): an impossible length says nothing (as a placeholder), a
    /// chunk that runs past the file is broken.
    @Test func lengthsNoFileCouldHoldAreJudgedWithoutATrap() throws {
        try TemporaryDirectory.using { directory throws in
            let format = Array("fmt ".utf8) + le(UInt32(16)) + [1, 0, 1, 0] + le(UInt32(8_000)) + le(UInt32(16_000)) + [2, 0, 16, 0]
            let samples = [UInt8](repeating: 7, count: 2_000)
            let lengths: [(whole: UInt64, data: UInt64)] = [(UInt64(Int64.max), 2_000), (UInt64.max, 2_000), (1 << 63, UInt64(Int64.max)),
                                                            (2_104, 1 << 63)]
            for (whole, data) in lengths {
                var ds64: [UInt8] = Array("ds64".utf8) + le(UInt32(28))
                ds64 += le(whole) + le(data) + le(UInt64(1_000)) + le(UInt32(0))
                var bw64: [UInt8] = Array("BW64".utf8) + le(UInt32.max) + Array("WAVE".utf8)
                bw64 += ds64 + format + Array("data".utf8) + le(UInt32.max) + samples
                #expect(try verdict(on: bw64, in: directory) != .unknown, "\(whole), \(data)")
            }
            let desc = Array("desc".utf8) + be(UInt64(32)) + be(Double(8_000).bitPattern) + Array("lpcm".utf8) + be(UInt32(2))
                + be(UInt32(2)) + be(UInt32(1)) + be(UInt32(1)) + be(UInt32(16))
            let header = Array("caff".utf8) + [0, 1, 0, 0]
            let hugeDesc = header + Array("desc".utf8) + be(UInt64(Int64.max)) + desc.dropFirst(12)
            #expect(try verdict(on: hugeDesc, in: directory) == .broken)
            for length in [UInt64(1) << 63, UInt64(Int64.max), UInt64.max - 1] {
                #expect(try verdict(on: header + desc + Array("data".utf8) + be(length) + samples, in: directory) == .broken, "\(length)")
            }
            #expect(try verdict(on: header + desc + Array("data".utf8) + be(UInt64.max) + [0, 0, 0, 0] + samples, in: directory) == .whole)
        }
    }

    /// A container whose format chunk names no format, channels or rate
    /// (zeros, or text behind a WAV's or CAF's header), or whose Ogg stream
    /// holds no audio, is no sound laid out whole; an Ogg stream of a codec
    /// that is no sound's is not judged.
    @Test func aLayoutWithoutTheFormatOrAudioOfASoundIsBroken() throws {
        try TemporaryDirectory.using { directory throws in
            let page = Array("<html><body>Not found</body></html>\n".utf8)
            let zeroFormat = Array("fmt ".utf8) + le(UInt32(16)) + [UInt8](repeating: 0, count: 16)
            let wav = Array("RIFF".utf8) + le(UInt32(0)) + Array("WAVE".utf8) + zeroFormat + Array("data".utf8) + le(UInt32(0)) + page
            #expect(try verdict(on: wav, in: directory) == .broken)
            let junk = Array("desc".utf8) + be(UInt64(32)) + be(Double(8_000).bitPattern) + Array("junk".utf8) + [UInt8](repeating: 1, count: 20)
            #expect(try verdict(on: Array("caff".utf8) + [0, 1, 0, 0] + junk + Array("data".utf8) + be(UInt64.max) + page,
                                in: directory) == .broken)
            func oggPage(_ packet: [UInt8], flags: UInt8, granule: UInt64) -> [UInt8] {
                var bytes = Array("OggS".utf8) + [0, flags] + le(granule) + le(UInt32(7)) + le(UInt32(0)) + [0, 0, 0, 0, 1, UInt8(packet.count)]
                    + packet
                var checksum = OggPageChecksum()
                for byte in bytes { checksum.add(byte) }
                bytes.replaceSubrange(22..<26, with: le(checksum.value))
                return bytes
            }
            let vorbis = [0x01] + Array("vorbis".utf8) + [0, 0, 0, 0, 2] + le(UInt32(44_100)) + [UInt8](repeating: 0, count: 14)
            #expect(try verdict(on: oggPage(vorbis, flags: 0x02, granule: 0) + oggPage(page, flags: 0x04, granule: 0), in: directory) == .broken)
            #expect(try verdict(on: oggPage(vorbis, flags: 0x02, granule: 0) + oggPage(page, flags: 0x04, granule: 9_000), in: directory) == .whole)
            let theora = [0x80] + Array("theora".utf8) + [UInt8](repeating: 0, count: 20)
            #expect(try verdict(on: oggPage(theora, flags: 0x02, granule: 0) + oggPage(page, flags: 0x04, granule: 9), in: directory) == .unknown)
        }
    }

    /// An AIFF or AIFF-C walks from after its `FORM` header to the end its
    /// length gives: one with two sound data chunks that libsndfile does not
    /// open is whole, and so is an AIFF-C of a codec it does not implement
    /// (QDesign's); cut short, or its chunks outside its `FORM`, it is not,
    /// and is refused though libsndfile said "unimplemented format".
    @Test func anAIFFIsWalkedToItsFormsEnd() throws {
        try TemporaryDirectory.using { directory throws in
            func chunk(_ name: String, _ body: [UInt8]) -> [UInt8] { Array(name.utf8) + be(UInt32(body.count)) + body + (body.count % 2 == 1 ? [0] : []) }
            func form(_ type: String, _ chunks: [UInt8], length: UInt32? = nil) -> [UInt8] {
                Array("FORM".utf8) + be(length ?? UInt32(4 + chunks.count)) + Array(type.utf8) + chunks
            }
            // 1 channel, 4,000 frames, 16 bits, 8,000 Hz as an 80-bit float.
            let common = [0, 1] + be(UInt32(4_000)) + [0, 16, 0x40, 0x0B, 0xFA, 0, 0, 0, 0, 0, 0, 0]
            let sound = [UInt8](repeating: 0, count: 8) + [UInt8](repeating: 3, count: 4_000)
            let twoSounds = form("AIFF", chunk("COMM", common) + chunk("SSND", sound) + chunk("SSND", sound))
            #expect(try verdict(on: twoSounds, in: directory) == .whole)
            #expect(try verdict(on: Array(twoSounds.dropLast(101)), in: directory) == .broken)
            #expect(try verdict(on: form("AIFF", [], length: 4) + chunk("COMM", common) + chunk("SSND", sound), in: directory) == .broken)
            let qdesign = form("AIFC", chunk("FVER", be(UInt32(0xA280_5140))) + chunk("COMM", common + Array("QDM2".utf8) + [0])
                + chunk("SSND", sound))
            for (bytes, stored) in [(qdesign, true), (Array(qdesign.dropLast(101)), false)] {
                let path = directory.appending("qdesign-\(stored).aiff")
                try Data(bytes).write(to: URL(fileURLWithPath: path))
                let error = try #require(throws: SoundFileError.self) { try SoundCheck.facts(of: path) }
                #expect(error.unsupported == stored, "\(error)")
            }
        }
    }

    /// An MP3 with bytes between its ID3 tag and its first frame (zeros some
    /// taggers leave outside the tag, two chance frame headers among them),
    /// or one that opens with zeros, is found by four frames in a row, and
    /// libsndfile reads it from there. It knows such a file by content only
    /// where a frame comes first, else by a name ending `.mp3`, which a body
    /// being stored has not: it was stored without facts, its Xing header
    /// unread, or refused (zeros first, at a sound's URL).
    @Test func anMP3WithBytesBetweenItsTagAndItsFirstFrameIsFoundByItsFrames() throws {
        try TemporaryDirectory.using { directory in
            let plain = directory.appending("plain.mp3")
            try SampleSounds.write(.mp3, to: plain, seconds: 2, seed: 67)
            let frames = [UInt8](try #require(FileManager.default.contents(atPath: plain)))
            // An ID3v2.4 tag with a title.
            let title = Array("TIT2".utf8) + [0, 0, 0, 6, 0, 0, 3] + Array("Song".utf8) + [0]
            let tag = Array("ID3".utf8) + [4, 0, 0, 0, 0, 0, UInt8(title.count)] + title
            // Two chance frame headers (MPEG-1 Layer III, 128 kb/s, 44.1 kHz: 417 bytes each) in the junk.
            let chance = ([0xFF, 0xFB, 0x90, 0x44] + [UInt8](repeating: 0, count: 413)) + ([0xFF, 0xFB, 0x90, 0x44] + [UInt8](repeating: 0, count: 413))
            let junk = [UInt8](repeating: 0, count: 50) + chance + [UInt8](repeating: 0, count: 333)
            for (bytes, start) in [(tag + junk + frames, tag.count + junk.count), ([UInt8](repeating: 0, count: 333) + frames, 333)] {
                let body = directory.appending("body"), cut = directory.appending("cut")
                try Data(bytes).write(to: URL(fileURLWithPath: body))
                #expect(try #require(ContainerLength.Head(path: body)).audioStart == Int64(start))
                let facts = try SoundCheck.facts(of: body)
                #expect(facts.format == "mp3" && facts.durationSeconds == 2.0 && facts.sampleRate == 44_100 && facts.channels == 2,
                        "\(facts)")
                try Data(bytes.prefix(bytes.count / 2)).write(to: URL(fileURLWithPath: cut))
                let error = try #require(throws: SoundFileError.self) { try SoundCheck.facts(of: cut) }
                #expect(error.stage == .length && error.description.hasPrefix("its header announces "), "\(error)")
            }
            // A v2.4 tag with a footer, which libsndfile does not count: read from after it.
            let footed = Array("ID3".utf8) + [4, 0, 0x10, 0, 0, 0, UInt8(title.count)] + title + Array("3DI".utf8)
                + [4, 0, 0x10, 0, 0, 0, UInt8(title.count)]
            let body = directory.appending("footed")
            try Data(footed + frames).write(to: URL(fileURLWithPath: body))
            #expect(try SoundCheck.facts(of: body).durationSeconds == 2.0)
        }
    }

    /// The pages of an Ogg file, each whole.
    private func oggPages(_ bytes: [UInt8]) -> [[UInt8]] {
        var pages: [[UInt8]] = []
        var offset = 0
        while offset + 27 <= bytes.count {
            let segments = Int(bytes[offset + 26])
            let length = 27 + segments + bytes[offset + 27..<offset + 27 + segments].reduce(0) { $0 + Int($1) }
            pages.append(Array(bytes[offset..<offset + length]))
            offset += length
        }
        return pages
    }

    /// `page` with its flags, granule position and serial number set as
    /// given, its checksum made anew.
    private func oggPage(_ page: [UInt8], flags: UInt8? = nil, granule: Int64? = nil, serial: UInt32? = nil) -> [UInt8] {
        var page = page
        if let flags { page[5] = flags }
        if let granule { page.replaceSubrange(6..<14, with: le(UInt64(bitPattern: granule))) }
        if let serial { page.replaceSubrange(14..<18, with: le(serial)) }
        page.replaceSubrange(22..<26, with: [0, 0, 0, 0])
        var checksum = OggPageChecksum()
        for byte in page { checksum.add(byte) }
        page.replaceSubrange(22..<26, with: le(checksum.value))
        return page
    }

    /// The granule position of an Ogg page.
    private func granule(of page: [UInt8]) -> Int64 {
        Int64(bitPattern: page[6..<14].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
    }

    /// A recording of a live stream ends without a stream's last page, and
    /// may have a tag or zeros after it: no damage (it was refused as broken
    /// off). Bytes that are no page, with pages after them, are damage.
    @Test func aLiveRecordingWithATagAfterItIsWholeAndBytesBetweenPagesAreNot() throws {
        try TemporaryDirectory.using { directory in
            let source = directory.appending("source.ogg"), path = directory.appending("live.ogg")
            try SampleSounds.write(.ogg, to: source, seconds: 3, seed: 68)
            var pages = oggPages([UInt8](try #require(FileManager.default.contents(atPath: source))))
            let last = try #require(pages.last)
            pages[pages.count - 1] = oggPage(last, flags: last[5] & ~0x04)
            for trailer in [Array("TAG".utf8) + [UInt8](repeating: 0x20, count: 125), [UInt8](repeating: 0, count: 4_096)] {
                try Data(pages.flatMap { $0 } + trailer).write(to: URL(fileURLWithPath: path))
                #expect(OggPages(path: path, size: Int64(pages.joined().count + trailer.count))?.ending == .withoutAStreamsEnd)
                // (Without its last page flagged, libsndfile does not trim the last packet to the granule.)
                let seconds = try SoundCheck.facts(of: path).durationSeconds
                #expect((2.9...3.1).contains(seconds), "\(seconds)")
            }
            // After streams that all ended, even the start of a page is a trailer.
            let whole = [UInt8](try #require(FileManager.default.contents(atPath: source)))
            try Data(whole + Array("OggS".utf8) + [0, 0, 7]).write(to: URL(fileURLWithPath: path))
            #expect(try SoundCheck.facts(of: path).durationSeconds == 3.0)
            var broken = pages
            broken.insert(Array("junk between pages".utf8), at: pages.count / 2)
            try Data(broken.flatMap { $0 }).write(to: URL(fileURLWithPath: path))
            let error = try #require(throws: SoundFileError.self) { try SoundCheck.facts(of: path) }
            #expect(error == SoundFileError(description: "its Ogg page \(pages.count / 2 + 1) is not where the page before ends",
                                            stage: .integrity))
        }
    }

    /// A chained file's links are counted only where they follow each
    /// other and each begins at its start: not where two streams run side by
    /// side (multiplexed), nor where a link is a cut from a live source
    /// (its granules run on from where the source began), whose lengths
    /// the sum took for 6 s and 119 s.
    @Test func onlyLinksThatFollowEachOtherFromTheirStartAreAddedUp() throws {
        try TemporaryDirectory.using { directory in
            let first = directory.appending("first.ogg"), second = directory.appending("second.ogg"), path = directory.appending("x.ogg")
            try SampleSounds.write(.ogg, to: first, seconds: 3, seed: 69)
            try SampleSounds.write(.ogg, to: second, seconds: 2, seed: 70)
            let one = oggPages([UInt8](try #require(FileManager.default.contents(atPath: first)))).map { oggPage($0, serial: 1) }
            let two = oggPages([UInt8](try #require(FileManager.default.contents(atPath: second)))).map { oggPage($0, serial: 2) }
            try Data((one + two).flatMap { $0 }).write(to: URL(fileURLWithPath: path))
            #expect(try #require(OggPages(path: path, size: Int64((one + two).joined().count))).chainedFrames(sampleRate: 44_100) == 220_500)
            // Side by side: both first pages, then the others in turn.
            var sideBySide = [one[0], two[0]]
            for index in 1..<max(one.count, two.count) {
                if index < one.count { sideBySide.append(one[index]) }
                if index < two.count { sideBySide.append(two[index]) }
            }
            try Data(sideBySide.flatMap { $0 }).write(to: URL(fileURLWithPath: path))
            let multiplexed = try #require(OggPages(path: path, size: Int64(sideBySide.joined().count)))
            #expect(multiplexed.multiplexed && multiplexed.ending == .whole)
            #expect(multiplexed.chainedFrames(sampleRate: 44_100) == nil)
            // A first link whose granules begin 5,000,000 samples on.
            let live = one.map { granule(of: $0) > 0 ? oggPage($0, granule: granule(of: $0) + 5_000_000) : $0 }
            try Data((live + two).flatMap { $0 }).write(to: URL(fileURLWithPath: path))
            #expect(try #require(OggPages(path: path, size: Int64((live + two).joined().count))).chainedFrames(sampleRate: 44_100) == nil)
            #expect(try SoundCheck.facts(of: path).durationSeconds < 10)
            // Last granules no file could hold: not added up (the sum trapped).
            var huge = one
            huge[huge.count - 1] = oggPage(one[one.count - 1], granule: Int64.max - 5)
            huge += two
            huge[huge.count - 1] = oggPage(two[two.count - 1], granule: Int64.max - 5)
            try Data(huge.flatMap { $0 }).write(to: URL(fileURLWithPath: path))
            #expect(try #require(OggPages(path: path, size: Int64(huge.joined().count))).chainedFrames(sampleRate: 44_100) == nil)
            #expect(try SoundCheck.facts(of: path).durationSeconds < 10)
        }
    }

    /// A file of more streams than any sound has is not walked to its end
    /// (each page looked its stream up among all, for minutes), and a walk
    /// asked to stop stops.
    @Test func anOggWalkOfTooManyStreamsOrAskedToStopEndsUnjudged() throws {
        try TemporaryDirectory.using { directory in
            let path = directory.appending("streams.ogg")
            let template = oggPage(Array("OggS".utf8) + [0, 0x02] + [UInt8](repeating: 0, count: 20) + [1, 1, 0x2A])
            let pages = (0..<300).map { oggPage(template, serial: UInt32($0)) }
            try Data(pages.flatMap { $0 }).write(to: URL(fileURLWithPath: path))
            let size = Int64(pages.joined().count)
            #expect(OggPages(path: path, size: size)?.ending == .notJudged)
            #expect(OggPages(path: path, size: size)?.streams.count == OggPages.streamsAtMost)
            try Data(pages.prefix(200).flatMap { $0 } + pages.prefix(200).map { oggPage($0, flags: 0x04) }.flatMap { $0 })
                .write(to: URL(fileURLWithPath: path))
            #expect(OggPages(path: path, size: 400 * Int64(template.count))?.ending == .whole)
            #expect(OggPages(path: path, size: 400 * Int64(template.count), stop: { true })?.ending == .notJudged)
        }
    }

    /// An Ogg file libsndfile does not open (a stream of another codec
    /// first: Theora's, a Skeleton) cut short or damaged says so by its
    /// pages: refused wherever it came from (it was stored).
    @Test func anOggFileOfAnotherCodecCutShortProvesDamage() throws {
        try TemporaryDirectory.using { directory in
            let source = directory.appending("source.ogg"), path = directory.appending("video.ogg")
            try SampleSounds.write(.ogg, to: source, seconds: 2, seed: 71)
            let audio = oggPages([UInt8](try #require(FileManager.default.contents(atPath: source)))).map { oggPage($0, serial: 9) }
            let theora = oggPage(Array("OggS".utf8) + [0, 0x02] + [UInt8](repeating: 0, count: 20) + [1, 42] + [0x80]
                + Array("theora".utf8) + [UInt8](repeating: 3, count: 35), serial: 8)
            let bytes = (theora + audio.flatMap { $0 })
            try Data(bytes.prefix(bytes.count - 500)).write(to: URL(fileURLWithPath: path))
            let error = try #require(throws: SoundFileError.self) { try SoundCheck.facts(of: path) }
            #expect(error == SoundFileError(description: "it ends inside an Ogg page", stage: .length) && error.provesDamage)
        }
    }

    /// A page of an Ogg file with a byte changed fails its checksum: the
    /// layout is not whole.
    @Test func anOggPageWhoseChecksumFailsIsNoWholeLayout() throws {
        try TemporaryDirectory.using { directory in
            let path = directory.appending("changed.ogg")
            try UnopenedLayout.oggFLAC.write(to: path, seconds: 1, seed: 62)
            var bytes = [UInt8](try #require(FileManager.default.contents(atPath: path)))
            bytes[bytes.count / 2] ^= 0x10
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            #expect(ContainerLayout.verdict(try #require(ContainerLength.Head(path: path))) == .broken)
        }
    }

    /// libsndfile keeps the last failed open's reason in one place for the
    /// process, and checks run on several threads: each open's reason is
    /// its own file's (noise is no format it knows; a 32-bit FLAC is one it
    /// does not implement, which is no damage).
    @Test func eachFailedOpenReportsItsOwnFilesReason() throws {
        try TemporaryDirectory.using { directory in
            let noise = directory.appending("noise"), flac = directory.appending("true32.flac")
            try Data((0..<4_096).map { UInt8(truncatingIfNeeded: $0 &* 7919) }).write(to: URL(fileURLWithPath: noise))
            try Data(SampleSounds.flac32BitHeader).write(to: URL(fileURLWithPath: flac))
            let mixedUp = Atomic<Int>(0)
            DispatchQueue.concurrentPerform(iterations: 8) { worker in
                for _ in 0..<300 {
                    let path = worker % 2 == 0 ? noise : flac
                    do throws(SoundFileError) {
                        _ = try SoundFile(reading: path)
                        mixedUp.add(1, ordering: .relaxed)
                    } catch {
                        if error.unsupported != (path == flac) { mixedUp.add(1, ordering: .relaxed) }
                    }
                }
            }
            #expect(mixedUp.load(ordering: .relaxed) == 0)
        }
    }

    /// A FLAC cut where libFLAC ends without a word (on a frame's end) has
    /// fewer samples than its STREAMINFO counts: cut short all the same.
    @Test func aFLACCutOnAFrameBoundaryIsCutShort() throws {
        try TemporaryDirectory.using { directory in
            let whole = directory.appending("whole.flac"), cut = directory.appending("cut.flac")
            try SampleSounds.write(.flac, to: whole, seconds: 3, seed: 17, channels: 1)
            let bytes = [UInt8](try #require(FileManager.default.contents(atPath: whole)))
            // Frames begin with the sync code 0xFFF8 (fixed block size); cut before each in the middle
            // (within 1% of its end, a count may be an encoder's estimate: not judged).
            let starts = (bytes.count / 3..<bytes.count * 3 / 4).filter { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xF8 }
            #expect(!starts.isEmpty)
            var lengthStages = 0
            for start in starts {
                try Data(bytes[..<start]).write(to: URL(fileURLWithPath: cut))
                let error = try #require(throws: SoundFileError.self, "cut at \(start)") { try SoundCheck.facts(of: cut) }
                if error.stage == .length {
                    lengthStages += 1
                    #expect(error.description.hasPrefix("its header announces 132300 frames of audio, "), "\(error)")
                }
            }
            // At a true frame's start libFLAC says nothing: only the count shows it.
            #expect(lengthStages > 0)
        }
    }

    /// An MP3 without a frame count whose bitrate changes (VBR without a
    /// Xing header, or two joined) is read by libsndfile only as far as
    /// its estimate from the first frame's bitrate: its frames' headers
    /// give its length. (Three seconds at a high bitrate, then three at a
    /// low one, were counted 5.1 s.)
    @Test func anMP3WithoutAFrameCountIsCountedByItsFrames() throws {
        try TemporaryDirectory.using { directory in
            var joined: [UInt8] = []
            for (index, level) in [0.0, 1.0].enumerated() {
                let part = directory.appending("part\(index).mp3")
                try SampleSounds.write(sndfileFormat: Int32(SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III), to: part, seconds: 3,
                                       seed: 18, compression: level)
                let bytes = [UInt8](try #require(FileManager.default.contents(atPath: part)))
                // Without its first frame, which holds the Xing header and its frame count.
                joined += bytes.dropFirst(Int(try #require(ContainerLength.mpegFrameLength(Array(bytes.prefix(4))))))
            }
            let path = directory.appending("joined.mp3")
            try Data(joined).write(to: URL(fileURLWithPath: path))
            #expect(ContainerLength.Head(path: path)?.mpegAnnouncesFrames == false)
            #expect(try SoundFile(reading: path).announcedFrames ?? 0 < 5 * 44_100) // libsndfile's estimate
            let facts = try SoundCheck.facts(of: path)
            // Six seconds, and each part's encoder delay and padding (under 0.1 s).
            #expect(facts.durationSeconds >= 6.0 && facts.durationSeconds < 6.1, "\(facts)")
        }
    }

    /// An MP3 cut inside its ID3v2 tag (a cover picture) holds no audio at
    /// all: its tag says how long it is.
    @Test func anMP3CutInsideItsTagIsCutShort() throws {
        try TemporaryDirectory.using { directory in
            let path = directory.appending("cover.mp3")
            let tagSize = 45_000
            let tag = [0x49, 0x44, 0x33, 4, 0, 0] + (0..<4).map { UInt8(tagSize >> (7 * (3 - $0)) & 0x7F) }
            try Data(tag + [UInt8](repeating: 0, count: 27_000)).write(to: URL(fileURLWithPath: path))
            let error = try #require(throws: SoundFileError.self) { try SoundCheck.facts(of: path) }
            #expect(error == SoundFileError(description: "its header announces 45010 bytes of audio, 27010 are there", stage: .length))
            #expect(error.provesDamage)
        }
    }

    /// An MP3 cut short (by its server, a full disk) plays to where it ends;
    /// the Xing or Info header its encoder wrote says how many bytes the
    /// stream has, ID3 tag or not (the stream follows the tag).
    @Test func anMP3CutShortIsNoSoundAndSaysHowShort() throws {
        try TemporaryDirectory.using { directory in
            let whole = directory.appending("whole.mp3")
            try SampleSounds.write(.mp3, to: whole, seconds: 20, seed: 11)
            let bytes = try #require(FileManager.default.contents(atPath: whole))
            // An ID3v2 tag larger than what is read at first (a cover picture): 100,000 bytes, in 7-bit bytes.
            let tagSize = 100_000
            let tag = Data("ID3".utf8) + Data([4, 0, 0] + [21, 22, 23, 24].indices.map { UInt8(tagSize >> (7 * (3 - $0)) & 0x7F) })
                + Data(repeating: 0, count: tagSize)
            for (name, prefix) in [("cut.mp3", Data()), ("tagged.mp3", tag)] {
                let path = directory.appending(name)
                try (prefix + bytes.prefix(bytes.count / 2)).write(to: URL(fileURLWithPath: path))
                let shortfall = try #require(ContainerLength.Head(path: path)?.shortfall, "\(name)")
                #expect(shortfall.announced == Int64(bytes.count), "\(name)")
                #expect(shortfall.present == Int64(bytes.count / 2), "\(name)")
                let error = try #require(throws: SoundFileError.self) { try SoundCheck.facts(of: path) }
                #expect(error.stage == .length)
                #expect(error.provesDamage)
                // The same, whole.
                try (prefix + bytes).write(to: URL(fileURLWithPath: path))
                #expect(ContainerLength.Head(path: path)?.shortfall == nil, "\(name)")
                #expect(try SoundCheck.facts(of: path).durationSeconds == 20.0, "\(name)")
            }
        }
    }

    /// An MP3 shortened by whole frames (trimmed by an editor that left its
    /// first frame's byte count as it was) is whole: only one that ends
    /// inside a frame is cut short. Tags after the frames end them too;
    /// bytes that are no frame are not judged.
    @Test func anMP3EndingOnAFrameIsWhole() throws {
        try TemporaryDirectory.using { directory in
            let whole = directory.appending("whole.mp3"), path = directory.appending("edited.mp3")
            try SampleSounds.write(.mp3, to: whole, seconds: 20, seed: 13)
            let bytes = [UInt8](try #require(FileManager.default.contents(atPath: whole)))
            // The frame boundary nearest the middle, by the frames' own lengths.
            var boundary = 0
            while boundary < bytes.count / 2, let length = ContainerLength.mpegFrameLength(Array(bytes[boundary..<boundary + 4])) {
                boundary += Int(length)
            }
            #expect(boundary >= bytes.count / 2 && boundary < bytes.count / 2 + 1_000)
            let size = Int64(boundary)
            for (ending, cut) in [([UInt8](), false), (Array("TAG".utf8) + [UInt8](repeating: 0x20, count: 125), false),
                                  (Array("APETAGEX".utf8) + [UInt8](repeating: 0, count: 24), false), ([0xFF, 0xFB], true),
                                  ([UInt8](repeating: 0, count: 4_096), false)] {
                try Data(bytes[..<boundary] + ending).write(to: URL(fileURLWithPath: path))
                let walked = ContainerLength.mpegEndsInsideAFrame(path: path, from: 0, size: size + Int64(ending.count))
                #expect(walked == (ending.first == 0 ? nil : cut), "\(ending.prefix(8))")
                #expect((ContainerLength.Head(path: path)?.shortfall != nil) == cut, "\(ending.prefix(8))")
            }
            try Data(bytes[..<(boundary + 100)]).write(to: URL(fileURLWithPath: path))
            #expect(ContainerLength.mpegEndsInsideAFrame(path: path, from: 0, size: size + 100) == true)
        }
    }

    /// An MP3 without a frame count in its first frame is decoded on past
    /// its audio, into what follows (a Lyrics3 tag, padding), where the
    /// decoder may fail: that proves no damage. With the count, the decoder
    /// stops at the end of the audio.
    @Test func anMP3WithoutAFrameCountFailingAtItsEndIsNoProvenDamage() throws {
        try TemporaryDirectory.using { directory in
            let whole = directory.appending("whole.mp3"), path = directory.appending("padded.mp3")
            try SampleSounds.write(.mp3, to: whole, seconds: 3, seed: 14)
            let bytes = [UInt8](try #require(FileManager.default.contents(atPath: whole)))
            let first = Int(try #require(ContainerLength.mpegFrameLength(Array(bytes.prefix(4)))))
            #expect(ContainerLength.Head(path: whole)?.mpegAnnouncesFrames == true)
            // Without its Info frame, and 4 KiB of zeros after the audio.
            try Data(bytes[first...] + [UInt8](repeating: 0, count: 4_096)).write(to: URL(fileURLWithPath: path))
            #expect(ContainerLength.Head(path: path)?.mpegAnnouncesFrames == false)
            let error = try #require(throws: SoundFileError.self) { try SoundCheck.facts(of: path) }
            #expect(error.stage == .decoding && (error.decodedSeconds ?? 0) > 2.5, "\(error)")
            #expect(!error.announcesLength)
            #expect(!error.provesDamage)
            // With it, the same padding is never decoded.
            try Data(bytes + [UInt8](repeating: 0, count: 4_096)).write(to: URL(fileURLWithPath: path))
            #expect(try SoundCheck.facts(of: path).durationSeconds == 3.0)
        }
    }

    /// An MP3 broken mid-way opens and decodes to where it breaks: its
    /// decoder's failure after seconds of audio proves it damaged.
    @Test func anMP3BrokenMidwaySaysWhereItBroke() throws {
        try TemporaryDirectory.using { directory in
            let whole = directory.appending("whole.mp3"), broken = directory.appending("broken.mp3")
            try SampleSounds.write(.mp3, to: whole, seconds: 20, seed: 12)
            var bytes = try #require(FileManager.default.contents(atPath: whole))
            bytes.replaceSubrange(300_000..<500_000, with: Data(count: 200_000))
            try bytes.write(to: URL(fileURLWithPath: broken))
            #expect(ContainerLength.Head(path: broken)?.shortfall == nil)
            let error = try #require(throws: SoundFileError.self) { try SoundCheck.facts(of: broken) }
            #expect(error.stage == .decoding)
            let seconds = try #require(error.decodedSeconds)
            // 300,000 bytes of a 20-second stream of about 800,000.
            #expect(seconds > 5 && seconds < 9, "\(error)")
            #expect(error.description.hasSuffix(" after \((seconds * 10).rounded() / 10) s of audio"), "\(error)")
            #expect(error.announcesLength)
            #expect(error.provesDamage)
        }
    }

    /// The byte counts of MPEG headers other than the sample's (MPEG-2 mono
    /// Layer III, VBRI), and what is no shortfall: a count within 1% of the
    /// stream, one the whole file holds (an encoder that counted its tag),
    /// a header without a count, and bytes that are no frame.
    @Test func mpegHeadersSayTheirStreamsLength() throws {
        func be(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.bigEndian, Array.init) }
        // MPEG-2 Layer III, 64 kbit/s, 22.05 kHz, mono: 9 bytes of side information.
        let mpeg2Mono: [UInt8] = [0xFF, 0xF3, 0x80, 0xC4] + [UInt8](repeating: 0, count: 9)
        let info = mpeg2Mono + Array("Info".utf8) + be(3) + be(400) + be(50_000) + [UInt8](repeating: 0, count: 100)
        #expect(ContainerLength.mpegAnnouncedBytes(info) == 50_000)
        #expect(ContainerLength.mpegShortfall(firstFrame: info, tagBytes: 0, fileSize: 20_000)! == (50_000, 20_000))
        #expect(ContainerLength.mpegShortfall(firstFrame: info, tagBytes: 0, fileSize: 49_600) == nil)
        #expect(ContainerLength.mpegShortfall(firstFrame: info, tagBytes: 2_000, fileSize: 50_000) == nil)
        // The head alone judges WAV and AIFF: an MP3's shortfall is confirmed by a walk of its frames.
        #expect(ContainerLength.shortfall(head: info, fileSize: 20_000) == nil)
        // Frame lengths: MPEG-1 Layer III 128 kbit/s 44.1 kHz (417, 418 padded), MPEG-2 Layer III 64 kbit/s
        // 22.05 kHz (208), MPEG-1 Layer II 192 kbit/s 48 kHz (576), Layer I 32 kbit/s 32 kHz (48); free format: none.
        #expect(ContainerLength.mpegFrameLength([0xFF, 0xFB, 0x90, 0x64]) == 417)
        #expect(ContainerLength.mpegFrameLength([0xFF, 0xFB, 0x92, 0x64]) == 418)
        #expect(ContainerLength.mpegFrameLength(mpeg2Mono) == 208)
        #expect(ContainerLength.mpegFrameLength([0xFF, 0xFD, 0xA4, 0x00]) == 576)
        #expect(ContainerLength.mpegFrameLength([0xFF, 0xFF, 0x18, 0x00]) == 48)
        #expect(ContainerLength.mpegFrameLength([0xFF, 0xFB, 0x00, 0x64]) == nil)
        let framesOnly = mpeg2Mono + Array("Xing".utf8) + be(1) + be(400) + [UInt8](repeating: 0, count: 100)
        #expect(ContainerLength.mpegAnnouncedBytes(framesOnly) == nil)
        // VBRI, 32 bytes after the frame header: version, delay, quality, then the bytes.
        let vbri: [UInt8] = [0xFF, 0xFB, 0x90, 0x64] + [UInt8](repeating: 0, count: 32) + Array("VBRI".utf8)
            + [0, 1, 0, 0, 0, 75] + be(123_456) + be(1_000) + [UInt8](repeating: 0, count: 40)
        #expect(ContainerLength.mpegAnnouncedBytes(vbri) == 123_456)
        #expect(ContainerLength.mpegAnnouncedBytes(Array("OggS\u{0}\u{2}".utf8) + info) == nil)
        #expect(ContainerLength.mpegAnnouncedBytes([0xFF, 0xEB, 0x90, 0x64] + info) == nil) // reserved version
    }

    /// libsndfile plays a WAV or AIFF file cut short to where it ends; its
    /// header says how long it should be.
    @Test(arguments: [SoundFormat.wav, .aiff])
    func aWAVOrAIFFCutShortIsNoSoundAndSaysHowShort(_ format: SoundFormat) throws {
        try TemporaryDirectory.using { directory in
            let whole = directory.appending("whole.\(format.rawValue)"), cut = directory.appending("cut.\(format.rawValue)")
            try SampleSounds.write(format, to: whole, seconds: 1, seed: 10)
            let bytes = try #require(FileManager.default.contents(atPath: whole))
            try bytes.prefix(40_000).write(to: URL(fileURLWithPath: cut))
            #expect(ContainerLength.Head(path: whole)?.shortfall == nil)
            let shortfall = try #require(ContainerLength.Head(path: cut)?.shortfall)
            // One second of 16-bit stereo at 44.1 kHz (AIFF's sound data chunk counts its 8-byte header too).
            #expect(shortfall.announced == (format == .wav ? 176_400 : 176_408))
            #expect(shortfall.present < 40_000 && shortfall.present > 39_900)
            let expected = "its header announces \(shortfall.announced) bytes of audio, \(shortfall.present) are there"
            #expect(throws: SoundFileError(description: expected, stage: .length)) {
                try SoundCheck.facts(of: cut)
            }
        }
    }

    @Test func aHeaderThatSaysNoLengthIsNoShortfall() throws {
        func wav(dataSize: UInt32, extra: Int) -> [UInt8] {
            func le(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.littleEndian, Array.init) }
            return Array("RIFF".utf8) + le(0) + Array("WAVEfmt ".utf8) + le(16) + [UInt8](repeating: 1, count: 16)
                + Array("data".utf8) + le(dataSize) + [UInt8](repeating: 0, count: extra)
        }
        // A stream's header, written before its length was known.
        #expect(ContainerLength.shortfall(head: wav(dataSize: 0, extra: 100), fileSize: 144) == nil)
        #expect(ContainerLength.shortfall(head: wav(dataSize: 0xFFFF_FFFF, extra: 100), fileSize: 144) == nil)
        #expect(ContainerLength.shortfall(head: wav(dataSize: 100, extra: 100), fileSize: 144) == nil)
        let short = try #require(ContainerLength.shortfall(head: wav(dataSize: 200, extra: 100), fileSize: 144))
        #expect(short == (200, 100))
        #expect(ContainerLength.shortfall(head: Array("OggS\u{0}\u{2}and more bytes".utf8), fileSize: 20) == nil)
    }

    @Test func noiseAndPagesAreNoSound() throws {
        try TemporaryDirectory.using { directory in
            let noise = directory.appending("noise.wav"), page = directory.appending("page.mp3")
            try fixtureBytes(count: 3_000, seed: 9).write(to: URL(fileURLWithPath: noise))
            try Data("<!doctype html><html><body>Sorry</body></html>".utf8).write(to: URL(fileURLWithPath: page))
            #expect(throws: SoundFileError(description: "Format not recognised")) { try SoundCheck.facts(of: noise) }
            #expect(throws: SoundFileError.self) { try SoundCheck.facts(of: page) }
        }
    }

    @Test func aDecodeStopsWhenAsked() throws {
        try TemporaryDirectory.using { directory in
            let path = directory.appending("long.flac")
            try SampleSounds.write(.flac, to: path, seconds: 2, seed: 7)
            #expect(throws: SoundFileError.stopped) { try SoundCheck.facts(of: path, stop: { true }) }
        }
    }

    /// The decoder's notes cannot reach the terminal: the check's thread has
    /// its own descriptor table, with /dev/null as its stderr, and none of
    /// the process's other descriptors (a partial's lock would be held by a
    /// copy); what follows the check runs with the process's table (it
    /// stores the body and starts the next download).
    @Test func aCheckRunsWhereStderrGoesNowhereAndWhatFollowsRunsWithTheProcesssDescriptors() throws {
        try TemporaryDirectory.using { directory in
            let stderrBefore = Self.target(of: "/proc/self/fd/2")
            let held = open(directory.appending("held"), O_CREAT | O_WRONLY | O_CLOEXEC, 0o600)
            #expect(held >= 0)
            defer { close(held) }
            let seen = Mutex<[String: String]>([:])
            let done = DispatchSemaphore(value: 0)
            let started = QuietThread.run(named: "test-quiet", {
                (Self.target(of: "/proc/thread-self/fd/2") ?? "none", fcntl(held, F_GETFD))
            }, then: { inside in
                seen.withLock {
                    $0["stderr inside"] = inside.0
                    $0["held inside"] = String(inside.1)
                    $0["stderr after"] = Self.target(of: "/proc/thread-self/fd/2") ?? "none"
                    $0["held after"] = String(fcntl(held, F_GETFD))
                }
                done.signal()
            })
            #expect(started)
            done.wait()
            let after = stderrBefore ?? "none"
            #expect(seen.withLock { $0 } == ["stderr inside": "/dev/null", "held inside": "-1",
                                             "stderr after": after, "held after": String(FD_CLOEXEC)])
            #expect(Self.target(of: "/proc/self/fd/2") == stderrBefore)
        }
    }

    /// Decoding is work for a core, and each check takes two threads: at
    /// most `atOnce` run at a time, the others wait their turn.
    @Test func atMostFourChecksRunAtOnceAndEveryOneRuns() throws {
        try TemporaryDirectory.using { directory in
            let path = directory.appending("short.flac")
            try SampleSounds.write(.flac, to: path, seconds: 0.5, seed: 11)
            let inside = Atomic(0), most = Atomic(0), finished = Atomic(0)
            let done = DispatchSemaphore(value: 0)
            for _ in 0..<10 {
                // Asked between blocks of each decode: a check in here is running.
                SoundCheck.start(path, stop: {
                    let now = inside.add(1, ordering: .sequentiallyConsistent).newValue
                    _ = most.max(now, ordering: .sequentiallyConsistent)
                    usleep(5_000)
                    inside.subtract(1, ordering: .sequentiallyConsistent)
                    return false
                }, completion: { result in
                    if case .success = result { finished.add(1, ordering: .sequentiallyConsistent) }
                    done.signal()
                })
            }
            for _ in 0..<10 { done.wait() }
            #expect(finished.load(ordering: .sequentiallyConsistent) == 10)
            #expect(SoundCheck.atOnce == 4)
            #expect(most.load(ordering: .sequentiallyConsistent) <= 4)
            #expect(most.load(ordering: .sequentiallyConsistent) > 1)
        }
    }

    private static func target(of link: String) -> String? {
        try? FileManager.default.destinationOfSymbolicLink(atPath: link)
    }
}

@Suite struct MediaSignatureTests {
    @Test func imagesAreKnownByTheirFirstBytes() {
        #expect(MediaSignature.image(SamplePhotos.photo(1, of: .small).map { $0 }) == "jpeg")
        #expect(MediaSignature.image([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0]) == "png")
        #expect(MediaSignature.image(Array("GIF89a....".utf8)) == "gif")
        #expect(MediaSignature.image(Array("RIFF\u{0}\u{0}\u{0}\u{0}WEBPVP8 ".utf8)) == "webp")
        #expect(MediaSignature.image(Array("\u{0}\u{0}\u{0}\u{18}ftypheic".utf8)) == "heif")
        #expect(MediaSignature.image(Array("\u{0}\u{0}\u{0}\u{18}ftypavif".utf8)) == "avif")
        var bmp = Array("BM".utf8) + [UInt8](repeating: 0, count: 16)
        bmp[14] = 40
        #expect(MediaSignature.image(bmp) == "bmp")
        // Text that opens with the same two letters is no bitmap.
        #expect(MediaSignature.image(Array("BMW service intervals, 2024 edition".utf8)) == nil)
        #expect(MediaSignature.image(Array("RIFF\u{0}\u{0}\u{0}\u{0}WAVEfmt ".utf8)) == nil)
        #expect(MediaSignature.image([]) == nil)
    }

    @Test(arguments: SoundFormat.allCases)
    func soundsLibsndfileReadsAreKnownByTheirFirstBytes(_ format: SoundFormat) throws {
        try TemporaryDirectory.using { directory in
            let path = directory.appending("s.\(format.rawValue)")
            try SampleSounds.write(format, to: path, seconds: 0.2, seed: 8)
            let opening = try #require(FileManager.default.contents(atPath: path)).prefix(512)
            // LAME writes an MP3 with no tag: its first frame is all there is to know it by.
            #expect(MediaSignature.readableSound(Array(opening), bareFrames: format == .mp3))
            #expect(MediaSignature.readableSound(Array(opening)) == (format != .mp3))
            #expect(MediaSignature.image(Array(opening)) == nil)
        }
    }

    @Test func otherBytesAreNoSound() {
        #expect(!MediaSignature.readableSound(Array("RIFF\u{0}\u{0}\u{0}\u{0}AVI LIST".utf8)))
        #expect(!MediaSignature.readableSound(Array("<html>".utf8), bareFrames: true))
        #expect(MediaSignature.readableSound(Array("ID3\u{4}\u{0}".utf8)))
        // BW64 is RF64 by another name.
        #expect(MediaSignature.soundContainer(Array("BW64".utf8) + [0xFF, 0xFF, 0xFF, 0xFF] + Array("WAVEds64".utf8)))
        // AAC's ADTS frames share MPEG audio's sync word, with the layer bits clear: libsndfile does not read them.
        #expect(!MediaSignature.readableSound([0xFF, 0xF1, 0x50, 0x80], bareFrames: true))
        #expect(MediaSignature.readableSound([0xFF, 0xFB, 0x90, 0x64], bareFrames: true))
    }
}

@Suite struct ImageEndTests {
    /// `ImageEnd.shortfall` for `bytes` written to a file, its last 32
    /// bytes known (as a download keeps them) or not (read from the file).
    private func shortfall(_ format: String, _ bytes: [UInt8], closingKnown: Bool = true) throws -> String? {
        try TemporaryDirectory.using { directory in
            let path = directory.appending("image")
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            return ImageEnd.shortfall(format: format, opening: Array(bytes.prefix(512)),
                                      closing: closingKnown ? Array(bytes.suffix(32)) : [], size: Int64(bytes.count), path: path)
        }
    }

    /// A photo cut anywhere short of its end (a baseline JPEG, and a
    /// progressive one of ten scans) lacks its end marker; whole, with or
    /// without its last bytes known, or with bytes after its end (a motion
    /// photo's video), it is whole.
    @Test(arguments: SamplePhotos.Picture.allCases)
    func aJPEGCutAnywhereLacksItsEndMarker(_ picture: SamplePhotos.Picture) throws {
        let photo = [UInt8](SamplePhotos.photo(7, of: picture))
        #expect(try shortfall("jpeg", photo) == nil)
        #expect(try shortfall("jpeg", photo, closingKnown: false) == nil)
        #expect(try shortfall("jpeg", photo + [UInt8](fixtureBytes(count: 100_000, seed: 3))) == nil)
        for length in stride(from: 3, to: photo.count, by: 97) + [photo.count - 2, photo.count - 1] {
            #expect(try shortfall("jpeg", Array(photo.prefix(length))) == "a JPEG without its end marker", "cut at \(length)")
        }
        // Cut just after the end marker of the thumbnail inside its EXIF segment: the segment runs past the end.
        let thumbnail: [UInt8] = [0xFF, 0xD8, 0xFF, 0xDB, 0, 4, 1, 2] + [UInt8](repeating: 7, count: 300) + [0xFF, 0xD9]
        let exif = Array("Exif\u{0}\u{0}".utf8) + thumbnail + [UInt8](repeating: 0, count: 2_000)
        let withThumbnail = [0xFF, 0xD8, 0xFF, 0xE1, UInt8((exif.count + 2) >> 8), UInt8((exif.count + 2) & 0xFF)] + exif
            + photo.dropFirst(2)
        #expect(try shortfall("jpeg", withThumbnail) == nil)
        #expect(try shortfall("jpeg", Array(withThumbnail.prefix(6 + 6 + thumbnail.count))) == "a JPEG without its end marker")
        // Not a JPEG's structure after its first bytes: not judged.
        #expect(try shortfall("jpeg", [0xFF, 0xD8, 0xFF] + Array("not a segment".utf8)) == nil)
    }

    private func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        withUnsafeBytes(of: UInt32(data.count).bigEndian, Array.init) + Array(type.utf8) + data + [1, 2, 3, 4]
    }

    @Test func aPNGCutAnywhereLacksItsIENDChunk() throws {
        let png = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunk("IHDR", [UInt8](repeating: 1, count: 13))
            + chunk("IDAT", [UInt8](fixtureBytes(count: 3_000, seed: 4))) + chunk("IDAT", [UInt8](fixtureBytes(count: 70_000, seed: 5)))
            + [0, 0, 0, 0, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82]
        #expect(try shortfall("png", png) == nil)
        #expect(try shortfall("png", png, closingKnown: false) == nil)
        #expect(try shortfall("png", png + Array("trailing".utf8)) == nil)
        for length in stride(from: 9, to: png.count, by: 331) + [png.count - 1] {
            #expect(try shortfall("png", Array(png.prefix(length))) == "a PNG without its IEND chunk", "cut at \(length)")
        }
    }

    @Test func aGIFCutAnywhereLacksItsTrailer() throws {
        // 2 × 1 pixels, a global table of two colours, a graphic control extension, one image in two sub-blocks.
        let gif: [UInt8] = Array("GIF89a".utf8) + [2, 0, 1, 0, 0x80, 0, 0] + [0, 0, 0, 255, 255, 255]
            + [0x21, 0xF9, 4, 0, 0, 0, 0, 0]
            + [0x2C, 0, 0, 0, 0, 2, 0, 1, 0, 0, 2, 3, 0x44, 0x01, 0x02, 1, 0x05, 0]
            + [0x3B]
        #expect(try shortfall("gif", gif) == nil)
        #expect(try shortfall("gif", gif + [0, 0, 0]) == nil)
        for length in 7..<gif.count - 1 {
            #expect(try shortfall("gif", Array(gif.prefix(length))) == "a GIF without its trailer", "cut at \(length)")
        }
        // Without its trailer, ending right after its image (as some encoders leave it): whole.
        #expect(try shortfall("gif", Array(gif.dropLast())) == nil)
        #expect(try shortfall("gif", Array(gif.dropLast()) + [0x99]) == nil) // not a block: not judged
        // A GIF cut on a data byte of 0x3B is walked, not taken for whole by its last byte.
        let cutOnData = Array(gif.prefix(gif.count - 5)) + [0x3B]
        #expect(try shortfall("gif", cutOnData) == "a GIF without its trailer")
    }

    @Test func aWebPOrHEIFShorterThanItsHeaderOrBoxesSay() throws {
        func le(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.littleEndian, Array.init) }
        func box(_ type: String, _ length: Int) -> [UInt8] {
            withUnsafeBytes(of: UInt32(length).bigEndian, Array.init) + Array(type.utf8) + [UInt8](repeating: 7, count: length - 8)
        }
        let webp = Array("RIFF".utf8) + le(4_000 - 8) + Array("WEBPVP8 ".utf8) + [UInt8](repeating: 9, count: 4_000 - 16)
        #expect(try shortfall("webp", webp) == nil)
        #expect(try shortfall("webp", Array(webp.prefix(2_500))) == "its header announces 4000 bytes, 2500 are there")
        let heif = box("ftyp", 24) + box("meta", 300) + box("mdat", 5_000)
        #expect(try shortfall("heif", heif) == nil)
        #expect(try shortfall("avif", Array(heif.prefix(4_000))) == "an AVIF whose last box ends past the file's end")
        // Cut where a box ends, before the media data: no image in it.
        #expect(try shortfall("heif", Array(heif.prefix(24))) == "a HEIF without its media data box")
        #expect(try shortfall("avif", Array(heif.prefix(324))) == "an AVIF without its media data box")
        // After the media data, a trailer that is no box of the format's (a motion photo's, a proxy's comment).
        #expect(try shortfall("heif", heif + Array("MotionPhoto_Data".utf8) + [UInt8](repeating: 5, count: 3_000)) == nil)
        #expect(try shortfall("avif", heif + Array("<!-- cache hit -->\n".utf8)) == nil)
        // Bytes after the last box that are no box's header: not judged.
        #expect(try shortfall("avif", heif + [UInt8](repeating: 1, count: 100)) == nil)
        #expect(try shortfall("heif", heif + [0, 0, 7]) == nil)
        // A largesize of 2^63 - 1 (no sum that overflows), and one too small for its own header.
        let huge = box("ftyp", 24) + [0, 0, 0, 1] + Array("mdat".utf8) + [0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
        #expect(try shortfall("heif", huge) == "a HEIF whose last box ends past the file's end")
        #expect(try shortfall("heif", box("ftyp", 24) + [0, 0, 0, 1] + Array("mdat".utf8) + [0, 0, 0, 0, 0, 0, 0, 8]) == nil)
        // Item data in the `meta` box's own `idat`, with no `mdat`: whole.
        let meta = [0, 0, 0, 8 + 4 + 20] + Array("meta".utf8) + [0, 0, 0, 0] + [0, 0, 0, 20] + Array("idat".utf8)
            + [UInt8](repeating: 3, count: 12)
        #expect(try shortfall("heif", box("ftyp", 24) + meta) == nil)
        // A last box of length 0 goes to the file's end.
        #expect(try shortfall("heif", box("ftyp", 24) + [0, 0, 0, 0] + Array("mdat".utf8) + [1, 2, 3]) == nil)
    }

    /// A TIFF's directories and the strips they point at must lie within
    /// the file: a TIFF cut short (or a stub of its header and directory)
    /// was stored as a photo.
    @Test func aTIFFWhoseDirectoryOrStripsRunPastItsEndIsCutShort() throws {
        func tiff(bigEndian: Bool, strips: [(offset: Int, count: Int)], tableAt: Int = 64, dataEnd: Int) -> [UInt8] {
            func number(_ value: Int, _ width: Int) -> [UInt8] {
                let bytes = (0..<width).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
                return bigEndian ? bytes.reversed() : bytes
            }
            func entry(_ tag: Int, _ type: Int, _ count: Int, _ field: [UInt8]) -> [UInt8] {
                number(tag, 2) + number(type, 2) + number(count, 4) + field + [UInt8](repeating: 0, count: 4 - field.count)
            }
            // Offsets as LONGs, lengths as SHORTs: in their fields when one strip, else in tables at `tableAt`.
            let one = strips.count == 1
            let offsetsField = one ? number(strips[0].offset, 4) : number(tableAt, 4)
            let lengthsField = one ? number(strips[0].count, 2) : number(tableAt + 4 * strips.count, 4)
            var file = (bigEndian ? Array("MM".utf8) : Array("II".utf8)) + number(42, 2) + number(8, 4)
            file += number(4, 2) + entry(256, 3, 1, number(10, 2)) + entry(257, 3, 1, number(5, 2))
                + entry(273, 4, strips.count, offsetsField) + entry(279, 3, strips.count, lengthsField) + number(0, 4)
            file += [UInt8](repeating: 0, count: tableAt - file.count)
            if !one { file += strips.flatMap { number($0.offset, 4) } + strips.flatMap { number($0.count, 2) } }
            return file + [UInt8](repeating: 0x77, count: dataEnd - file.count)
        }
        for bigEndian in [false, true] {
            let single = tiff(bigEndian: bigEndian, strips: [(100, 150)], dataEnd: 250)
            #expect(MediaSignature.image(single) == "tiff")
            #expect(try shortfall("tiff", single) == nil)
            #expect(try shortfall("tiff", single + [1, 2, 3]) == nil)
            #expect(try shortfall("tiff", Array(single.prefix(200))) == "its image data runs to byte 250, 200 are there")
            #expect(try shortfall("tiff", Array(single.prefix(30))) == "it ends inside its directory at byte 8")
            #expect(try shortfall("tiff", Array(single.prefix(6))) == "it ends inside its header")
            let strips = tiff(bigEndian: bigEndian, strips: [(200, 100), (300, 100), (400, 100)], dataEnd: 500)
            #expect(try shortfall("tiff", strips) == nil)
            #expect(try shortfall("tiff", Array(strips.prefix(450))) == "its image data runs to byte 500, 450 are there")
            #expect(try shortfall("tiff", Array(strips.prefix(70))) == "its table at byte 64 is past its end")
        }
        // A header that points past the file (a stub of 108 bytes).
        let stub = [0x49, 0x49, 0x2A, 0x00, 0xE8, 0x03, 0x00, 0x00] + [UInt8](repeating: 0, count: 100)
        #expect(try shortfall("tiff", stub) == "its directory at byte 1000 is past its end")
        // A last strip's length a few bytes over the end (libtiff decodes it), an empty tile
        // that points anywhere, a next directory past the end (garbage after a whole image).
        #expect(try shortfall("tiff", Array(tiff(bigEndian: false, strips: [(100, 158)], dataEnd: 258).prefix(250))) == nil)
        #expect(try shortfall("tiff", Array(tiff(bigEndian: false, strips: [(100, 159)], dataEnd: 259).prefix(250)))
                == "its image data runs to byte 259, 250 are there")
        #expect(try shortfall("tiff", tiff(bigEndian: false, strips: [(200, 100), (2_000_000, 0), (300, 100)], dataEnd: 400)) == nil)
        var garbage = tiff(bigEndian: false, strips: [(100, 150)], dataEnd: 250)
        garbage.replaceSubrange(58..<62, with: [0x00, 0x00, 0xFF, 0x7F])
        #expect(try shortfall("tiff", garbage) == nil)
        // BigTIFF, a directory that points at itself: not judged.
        #expect(try shortfall("tiff", [0x49, 0x49, 0x2B, 0x00, 8, 0, 0, 0] + [UInt8](repeating: 0, count: 40)) == nil)
        var looped = tiff(bigEndian: false, strips: [(100, 150)], dataEnd: 250)
        looped.replaceSubrange(58..<62, with: [8, 0, 0, 0])
        #expect(try shortfall("tiff", looped) == nil)
    }

    /// A BMP's pixels end where its header says: rows of the width's
    /// pixels padded to 4 bytes, from the offset its file header gives
    /// (the last row's padding may be left out); compressed, the image
    /// size its header gives. A BMP cut short was stored as a photo.
    @Test func aBMPShorterThanItsHeaderSaysIsCutShort() throws {
        func le(_ value: Int, _ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
        func bmp(width: Int, height: Int, bits: Int, compression: Int = 0, imageSize: Int = 0, offset: Int = 54, pixels: Int) -> [UInt8] {
            Array("BM".utf8) + le(offset + pixels, 4) + [0, 0, 0, 0] + le(offset, 4)
                + le(40, 4) + le(width, 4) + le(height, 4) + le(1, 2) + le(bits, 2) + le(compression, 4) + le(imageSize, 4)
                + [UInt8](repeating: 0, count: 16) + [UInt8](repeating: 0x55, count: offset - 54 + pixels)
        }
        // 10 × 5 pixels of 24 bits: rows of 30 bytes padded to 32.
        let whole = bmp(width: 10, height: 5, bits: 24, pixels: 160)
        #expect(MediaSignature.image(whole) == "bmp")
        #expect(try shortfall("bmp", whole) == nil)
        #expect(try shortfall("bmp", Array(whole.dropLast(2))) == nil)
        #expect(try shortfall("bmp", Array(whole.dropLast(3))) == "its header announces 212 bytes, 211 are there")
        #expect(try shortfall("bmp", Array(whole.prefix(100))) == "its header announces 212 bytes, 100 are there")
        // Cut inside its header: its pixels come after it.
        #expect(try shortfall("bmp", Array(whole.prefix(30))) == "its header announces 54 bytes, 30 are there")
        // Rows stored top to bottom (a negative height).
        let topDown = bmp(width: 10, height: -5, bits: 24, pixels: 160)
        #expect(try shortfall("bmp", topDown) == nil)
        #expect(try shortfall("bmp", Array(topDown.prefix(150))) == "its header announces 212 bytes, 150 are there")
        // RLE with a palette: the image size the header gives.
        let rle = bmp(width: 100, height: 100, bits: 8, compression: 1, imageSize: 500, offset: 1078, pixels: 500)
        #expect(try shortfall("bmp", rle) == nil)
        #expect(try shortfall("bmp", Array(rle.prefix(1_200))) == "its header announces 1578 bytes, 1200 are there")
        // A JPEG inside (0 bits a pixel): the image size the header gives.
        let inner = bmp(width: 100, height: 100, bits: 0, compression: 4, imageSize: 3_000, pixels: 3_000)
        #expect(try shortfall("bmp", inner) == nil)
        #expect(try shortfall("bmp", Array(inner.prefix(2_000))) == "its header announces 3054 bytes, 2000 are there")
        // No size given, or a header out of the format's ranges: not judged.
        #expect(try shortfall("bmp", Array(bmp(width: 100, height: 100, bits: 8, compression: 1, offset: 1078, pixels: 500).prefix(1_200))) == nil)
        #expect(try shortfall("bmp", Array(bmp(width: 10, height: 5, bits: 7, pixels: 160).prefix(100))) == nil)
        #expect(try shortfall("bmp", Array(bmp(width: 0, height: 5, bits: 24, pixels: 160).prefix(100))) == nil)
    }
}
