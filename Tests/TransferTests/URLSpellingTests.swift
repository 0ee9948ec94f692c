import Testing
import TestSupport
@testable import URLText

/// One spelling for the URLs that name one resource (see `URLSpelling`).
@Suite struct URLSpellingTests {
    @Test func urlsSpeltSoAlreadyAreThemselves() {
        for url in ["http://h/a/b.jpg", "https://h:8443/a%20b.jpg?q=%2F&x=1", "http://u:p@h/a", "http://[::1]:8080/a",
                    "http://h/a..b/.c/..d", "http://h/a?x=/./", "http://h/%2E%2E/a", "http://h/a%25zz", "http://h/a%",
                    "http://u%40x:p%3Aq@h/a", "http://[fe80::1%25eth0]:8080/a"] {
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
            // In the path, unreserved characters decoded, other encodings in capitals, %2E kept.
            ("http://h/%61%2D%5F%7E%31.jpg", "http://h/a-_~1.jpg"), ("http://h/a%2fb%3a", "http://h/a%2Fb%3A"),
            ("http://h/%2e%2e/a", "http://h/%2E%2E/a"),
            // A path with a % that begins no encoding has none decoded (spelt again, %4%31 would be %41, then A).
            ("http://h/%4%31", "http://h/%4%31"), ("http://h/%2%35%7e", "http://h/%2%35%7E"),
            // Bytes beyond ASCII in the path encoded, as curl sends them.
            ("http://h/日本%20x.jpg", "http://h/%E6%97%A5%E6%9C%AC%20x.jpg"),
            // ASCII no URL may hold encoded in the path, as its encoded form is spelt.
            ("http://h/a\"b<c>|{d}^`[e]\\f", "http://h/a%22b%3Cc%3E%7C%7Bd%7D%5E%60%5Be%5D%5Cf"), ("http://h/a%22b%3cc", "http://h/a%22b%3Cc"),
            // Escapes in the user information in capitals, none decoded.
            ("http://u%3ax%41:p%2f@h/a", "http://u%3Ax%41:p%2F@h/a"),
            // The query as written: signed URLs sign its bytes.
            ("http://h/a?x=%3d%41&q=é", "http://h/a?x=%3d%41&q=é"), ("http://H/./a?x=./%7e#f", "http://h/a?x=./%7e"),
            // No fragment.
            ("http://h/a.jpg#top", "http://h/a.jpg"), ("http://h/a.jpg?x#y", "http://h/a.jpg?x"),
        ]
        for (written, spelt) in cases {
            #expect(URLSpelling.normalized(written) == spelt, "\(written)")
            #expect(URLSpelling.normalized(spelt) == spelt, "\(spelt) again")
        }
    }

    /// Spelling a spelt URL changes nothing, whatever it was: generated URLs
    /// of the pieces that spelling changes (escapes good and stray, dots,
    /// slashes, capitals, ports, bytes beyond ASCII, queries, fragments).
    @Test func spellingTwiceIsSpellingOnce() {
        var generator = SeededGenerator(seed: 47)
        let pieces = ["%", "%4", "%41", "%2e", "%2E", "%7e", "%3a", "%zz", ".", "..", "/", "a", "Z", "é", "~", "-", "?", "#", "%25", "%%",
                      "\"", "<", ">", "|", "\\", "[", "]", "%22", "%7c"]
        let prefixes = ["http://h", "HTTP://H:80", "https://u:p@h:0443", "http://[::1]:08080", "http://h:", "http://u%3ax:p%2f@h",
                        "http://127.1", "http://[0:0::1]:80", "http://0x7f.1", "http://Bücher.example", "http://xn--bcher-kva.example"]
        for _ in 0..<20_000 {
            let rest = (0..<Int.random(in: 0...8, using: &generator)).map { _ in pieces.randomElement(using: &generator) ?? "" }.joined()
            let url = (prefixes.randomElement(using: &generator) ?? "http://h") + (Bool.random(using: &generator) ? "/" : "") + rest
            let once = URLSpelling.normalized(url)
            #expect(URLSpelling.normalized(once) == once, "\(url) → \(once)")
        }
    }

    /// A host that is an address is spelt as libcurl reads it: IPv4 in
    /// dotted decimal, IPv6 in RFC 5952's form. Names, numbers that are no
    /// address and literals with a zone stay as written.
    @Test func aHostThatIsAnAddressIsSpeltOneWay() {
        let cases: [(String, String)] = [
            ("http://127.1/a", "http://127.0.0.1/a"), ("http://0x7F.0.0.1:8080/a", "http://127.0.0.1:8080/a"),
            ("http://0177.0.0.01/a", "http://127.0.0.1/a"), ("http://2130706433/a", "http://127.0.0.1/a"),
            ("http://10.1.2/a", "http://10.1.0.2/a"), ("http://0xA.0X1.0x0002.00003/", "http://10.1.2.3/"),
            ("http://[0:0:0:0:0:0:0:1]:8080/a", "http://[::1]:8080/a"), ("http://[::FFFF:7F00:1]/a", "http://[::ffff:127.0.0.1]/a"),
            ("http://[2001:DB8:0:0:1:0:0:1]:80/", "http://[2001:db8::1:0:0:1]/"), ("http://[::1]/a", "http://[::1]/a"),
        ]
        for (written, spelt) in cases {
            #expect(URLSpelling.normalized(written) == spelt, "\(written)")
        }
        for url in ["http://256.1.1.1/a", "http://1.2.3.4.5/a", "http://1.2.3.example/a", "http://08.1.1.1/a", "http://0x/a",
                    "http://127.0.0.1./a", "http://4294967296/a", "http://1.2.65536/a", "http://[fe80::1%25eth0]/a",
                    "http://[::1::2]/a", "http://3com.example/a", "http://127.0.0.1/a"] {
            #expect(URLSpelling.normalized(url) == url)
        }
    }

    /// An IDN is spelt in its ASCII form, as libcurl looks it up and sends
    /// it: small letters, NFC, then Punycode. A name IDNA would map further
    /// (full-width letters) or that holds symbols stays as written.
    @Test func aHostBeyondASCIIIsSpeltInItsASCIIForm() {
        let cases: [(String, String)] = [
            ("http://Bücher.EXAMPLE/a", "http://xn--bcher-kva.example/a"), ("http://BÜCHER.example/a", "http://xn--bcher-kva.example/a"),
            ("http://bu\u{308}cher.example/a", "http://xn--bcher-kva.example/a"), ("https://straße.de:443/", "https://xn--strae-oqa.de/"),
            ("http://правда.рф/a", "http://xn--80aafi6cg.xn--p1ai/a"), ("http://日本語.jp/", "http://xn--wgv71a119e.jp/"),
            ("http://ann:pw@café.example:8080/a", "http://ann:pw@xn--caf-dma.example:8080/a"),
        ]
        for (written, spelt) in cases {
            #expect(URLSpelling.normalized(written) == spelt, "\(written)")
        }
        // What IDNA maps further than small letters and NFC: left as written, for libcurl
        // (ẞ is ss, a variation selector is dropped, Cherokee small letters fold to capitals).
        for url in ["http://xn--bcher-kva.example/a", "http://ｂücher.example/a", "http://bü☃cher.example/a", "http://-bü.example/a",
                    "http://straẞe.example/a", "http://a\u{FE00}b.example/a", "http://\u{AB70}.example/a", "http://\u{1FB3}.example/a"] {
            #expect(URLSpelling.normalized(url) == url, "\(url)")
        }
        // ß and ς are kept, as IDNA 2008 keeps them; a Kelvin sign is a k.
        #expect(URLSpelling.normalized("http://straße.example/") == "http://xn--strae-oqa.example/")
        #expect(URLSpelling.normalized("http://\u{3C3}\u{3C2}.example/") == "http://xn--3xab.example/")
        #expect(URLSpelling.normalized("http://\u{212A}itten.example/") == "http://kitten.example/")
        // A label too long for a name is left as written, at once: encoding is not tried.
        let long = String(repeating: "ü", count: 5_000)
        #expect(URLSpelling.normalized("http://\(long).example/") == "http://\(long).example/")
    }

    /// Punycode as RFC 3492 has it, both ways.
    @Test func punycodeEncodesAndDecodesLabels() {
        let cases = [("bücher", "bcher-kva"), ("münchen", "mnchen-3ya"), ("他们为什么不说中文", "ihqwcrb4cv8a8dqg056pqjye"),
                     ("mañana", "maana-pta"), ("ß", "zca"), ("правда", "80aafi6cg"), ("日本語", "wgv71a119e"),
                     ("bücher-no-such-host", "bcher-no-such-host-m6b")]
        for (unicode, punycode) in cases {
            #expect(HostSpelling.asciiLabel(unicode) == "xn--" + punycode)
            #expect(HostSpelling.readable("xn--" + punycode) == unicode)
        }
        // Shown as letters only where they spell back to the same label.
        #expect(HostSpelling.readable("xn--bcher-kva.example:80") == "bücher.example:80")
        for host in ["xn--zz.example", "xn--.example", "xn--Bcher-kva.example", "xn--a-ecp.example", "example.com"] {
            #expect(HostSpelling.readable(host[...]) == host, "\(host)")
        }
    }
}
