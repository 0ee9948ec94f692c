import Testing
@testable import ContentStore
@testable import MediaFetch

/// Which bodies are web pages where media was asked for.
@Suite struct PageInsteadOfMediaTests {
    @Test func aPageIsRefusedWhereTheURLOrTheKindNamesMedia() {
        let refused = PageInsteadOfMedia.reason(contentType: "text/html; charset=utf-8",
                                                url: "https://farm1.example/a/b/photo.JPG?size=l#top", kind: .file, size: 40)
        #expect(refused == "the server sent a web page (text/html, 40 B) where a .jpg file was asked for; not stored")
        #expect(PageInsteadOfMedia.reason(contentType: "application/xhtml+xml", url: "http://h/x", kind: .sound, size: 1)?
            .contains("where a sound was asked for") == true)
        #expect(PageInsteadOfMedia.reason(contentType: " TEXT/HTML ", url: "http://h/x", kind: .photo, size: 1) != nil)
    }

    @Test func anythingElseIsStoredAsItComes() {
        // A page where no media was named.
        for url in ["http://h/", "http://h/index.html", "http://h/page", "http://h/a.jpg/", "http://h/.mp3", "http://h/x?f=a.jpg"] {
            #expect(PageInsteadOfMedia.reason(contentType: "text/html", url: url, kind: .file, size: 1) == nil, "\(url)")
        }
        // Media, or anything not a page, under a media name.
        for type in ["image/jpeg", "application/octet-stream", "text/plain", "", nil] as [String?] {
            #expect(PageInsteadOfMedia.reason(contentType: type, url: "http://h/a.jpg", kind: .photo, size: 1) == nil)
        }
    }
}
