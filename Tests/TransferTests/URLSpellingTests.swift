import Testing
import URLText

/// One spelling for the URLs that name one resource (see `URLSpelling`).
@Suite struct URLSpellingTests {
    @Test func urlsSpeltSoAlreadyAreThemselves() {
        for url in ["http://h/a/b.jpg", "https://h:8443/a%20b.jpg?q=%2F&x=1", "http://u:p@h/a", "http://[::1]:8080/a",
                    "http://h/a..b/.c/..d", "http://h/a?x=/./", "http://h/%2E%2E/a", "http://h/a%25zz", "http://h/a%"] {
            #expect(URLSpelling.normalized(url) == url)
        }
    }

    @Test func theWaysOfWritingOneURLAreSpeltOneWay() {
        let cases: [(String, String)] = [
            // Scheme and host in small letters; the user information as it is.
            ("HTTP://Example.COM/A.jpg", "http://example.com/A.jpg"),
            ("http://User:PW@H/a", "http://User:PW@h/a"),
            // The default port left out, leading zeros dropped, an empty port the default.
            ("http://h:80/a", "http://h/a"), ("https://h:443/a", "https://h/a"), ("http://h:0080/a", "http://h/a"),
            ("http://h:/a", "http://h/a"), ("http://h:08080/a", "http://h:8080/a"), ("https://h:80/a", "https://h:80/a"),
            ("http://[::1]:80/a", "http://[::1]/a"),
            // An empty path is /.
            ("http://h", "http://h/"), ("http://h?q=1", "http://h/?q=1"), ("http://h:80", "http://h/"),
            // Dot segments resolved as libcurl resolves them.
            ("http://h/a/./b.jpg", "http://h/a/b.jpg"), ("http://h/a/b/../c.jpg", "http://h/a/c.jpg"),
            ("http://h/a/b/..", "http://h/a/"), ("http://h/a/.", "http://h/a/"), ("http://h/../../a", "http://h/a"),
            ("http://h/./?q=./x", "http://h/?q=./x"), ("http://h/a//./b", "http://h/a//b"),
            // Unreserved characters decoded, other encodings in capitals, %2E kept.
            ("http://h/%61%2D%5F%7E%31.jpg", "http://h/a-_~1.jpg"), ("http://h/a%2fb%3a?x=%3d%41", "http://h/a%2Fb%3A?x=%3DA"),
            ("http://h/%2e%2e/a", "http://h/%2E%2E/a"),
            // Bytes beyond ASCII encoded, as they go on the wire.
            ("http://h/日本%20x.jpg", "http://h/%E6%97%A5%E6%9C%AC%20x.jpg"), ("http://h/?q=é", "http://h/?q=%C3%A9"),
            // No fragment.
            ("http://h/a.jpg#top", "http://h/a.jpg"), ("http://h/a.jpg?x#y", "http://h/a.jpg?x"),
        ]
        for (written, spelt) in cases {
            #expect(URLSpelling.normalized(written) == spelt, "\(written)")
            #expect(URLSpelling.normalized(spelt) == spelt, "\(spelt) again")
        }
    }

    /// An IDN's host keeps its letters (only ASCII capitals are made small).
    @Test func aHostBeyondASCIIKeepsItsLetters() {
        #expect(URLSpelling.normalized("http://Bücher.EXAMPLE/a") == "http://bücher.example/a")
    }
}
