import Foundation
import MediaCheck
import SampleMedia
import Testing
import TestSupport

/// The sample media are what the end-to-end tests and the demo serve: they
/// must be real files, and the checks on them must tell a real file from a
/// broken one.
@Suite struct SampleMediaTests {
    @Test(arguments: SamplePhotos.Picture.allCases)
    func eachPictureIsAWholeJPEGOfItsSize(_ picture: SamplePhotos.Picture) {
        #expect(JPEGStructure.dimensions(of: picture.bytes) == picture.dimensions)
        #expect(picture.bytes.count > 1000)
    }

    @Test func numberedPhotosDifferAndStayWholeJPEGs() {
        let photos = (0..<3).map { SamplePhotos.photo($0, of: .medium) }
        #expect(Set(photos).count == 3)
        for photo in photos {
            #expect(JPEGStructure.dimensions(of: photo) == SamplePhotos.Picture.medium.dimensions)
        }
        // The comment goes after JFIF's APP0, which must come first.
        let photo = [UInt8](photos[1])
        #expect(Array(photo[0..<4]) == [0xFF, 0xD8, 0xFF, 0xE0])
        #expect(String(decoding: photos[1], as: UTF8.self).contains("mediafetch sample photo 1"))
    }

    @Test func whatIsNotAWholeJPEGHasNoDimensions() {
        let photo = SamplePhotos.photo(7)
        #expect(JPEGStructure.dimensions(of: Data("<!doctype html><html><body>Not found</body></html>".utf8)) == nil)
        #expect(JPEGStructure.dimensions(of: photo.prefix(photo.count / 2)) == nil)
        #expect(JPEGStructure.dimensions(of: Data()) == nil)
        // A segment length that runs past the end.
        var broken = [UInt8](photo)
        broken[4] = 0xFF
        broken[5] = 0xFF
        #expect(JPEGStructure.dimensions(of: Data(broken)) == nil)
    }

    @Test(arguments: SoundFormat.allCases)
    func aSoundWrittenThroughLibsndfileReadsBackWhole(_ format: SoundFormat) throws {
        try TemporaryDirectory.using { directory in
            let path = directory.appending("tone.\(format.rawValue)")
            try SampleSounds.write(format, to: path, seconds: 1.5, seed: 3, sampleRate: 22_050, channels: 2)
            let sound = try SampleSounds.describe(path)
            #expect(sound.format == format)
            #expect(sound.sampleRate == 22_050)
            #expect(sound.channels == 2)
            #expect(sound.frames == 33_075)
            #expect(sound.decodedFrames == sound.frames)
        }
    }

    @Test func seedsGiveOtherBytes() throws {
        try TemporaryDirectory.using { directory in
            let first = directory.appending("1.flac"), second = directory.appending("2.flac")
            try SampleSounds.write(.flac, to: first, seconds: 0.5, seed: 1)
            try SampleSounds.write(.flac, to: second, seconds: 0.5, seed: 2)
            #expect(FileManager.default.contents(atPath: first) != FileManager.default.contents(atPath: second))
        }
    }

    @Test func anHTMLPageIsNotASound() throws {
        try TemporaryDirectory.using { directory in
            let path = directory.appending("sound.mp3")
            try Data("<!doctype html><html><body>Sorry</body></html>".utf8).write(to: URL(fileURLWithPath: path))
            #expect(throws: SoundFileError.self) { try SampleSounds.describe(path) }
        }
    }

    @Test func aCutOffFLACDoesNotDecode() throws {
        try TemporaryDirectory.using { directory in
            let whole = directory.appending("whole.flac"), cut = directory.appending("cut.flac")
            try SampleSounds.write(.flac, to: whole, seconds: 2, seed: 4)
            let bytes = try #require(FileManager.default.contents(atPath: whole))
            try bytes.prefix(bytes.count / 2).write(to: URL(fileURLWithPath: cut))
            #expect(try SampleSounds.describe(whole).decodedFrames == 88_200)
            #expect(throws: SoundFileError.self) { try SampleSounds.describe(cut) }
        }
    }
}
