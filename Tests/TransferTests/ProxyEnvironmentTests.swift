import Testing
@testable import Transfer

@Suite struct ProxyEnvironmentTests {
    @Test func proxiesAreTakenFromTheVariablesCurlReads() {
        let both = ProxyEnvironment(["http_proxy": "http://p1:3128", "HTTPS_PROXY": "https://user:pw@p2", "ALL_PROXY": "p3:9"])
        #expect(both.proxy(forScheme: "http") == .init(variable: "http_proxy", host: "p1", port: 3128))
        #expect(both.proxy(forScheme: "https") == .init(variable: "HTTPS_PROXY", host: "p2", port: 443))
        // HTTP_PROXY in capitals is not read (curl does not, for CGI's sake); all_proxy is the fallback.
        let capitals = ProxyEnvironment(["HTTP_PROXY": "http://p1:3128", "all_proxy": "socks5://[::1]:1081"])
        #expect(capitals.proxy(forScheme: "http") == .init(variable: "all_proxy", host: "::1", port: 1081))
        #expect(ProxyEnvironment(["https_proxy": ""]).proxy(forScheme: "https") == nil)
        #expect(ProxyEnvironment.parse("10.0.0.1", variable: "http_proxy") == .init(variable: "http_proxy", host: "10.0.0.1", port: 1080))
    }

    @Test func onlyAFailureToReachTheProxyNamesIt() {
        let environment = ProxyEnvironment(["http_proxy": "http://127.0.0.1:1"])
        let atProxy = "Failed to connect to 127.0.0.1 port 1 after 0 ms: Couldn't connect to server"
        #expect(environment.named(in: atProxy, scheme: "http") == atProxy + " (the proxy 127.0.0.1:1, from $http_proxy)")
        // A URL no_proxy exempts fails on its own host and port: nothing is added.
        let direct = "Failed to connect to 127.0.0.1 port 8080 after 0 ms: Couldn't connect to server"
        #expect(environment.named(in: direct, scheme: "http") == direct)
        #expect(environment.named(in: atProxy, scheme: "https") == atProxy)
    }

    @Test func theVariableOfAProxyIsFoundByItsName() {
        let environment = ProxyEnvironment(["http_proxy": "http://Proxy.Example:3128", "https_proxy": "socks5h://socks.example"])
        #expect(environment.variable(ofProxyNamed: "proxy.example", scheme: "http") == "http_proxy")
        #expect(environment.variable(ofProxyNamed: "socks.example", scheme: "https") == "https_proxy")
        // Another scheme's proxy, or a name no proxy has (the host's own).
        #expect(environment.variable(ofProxyNamed: "proxy.example", scheme: "https") == nil)
        #expect(environment.variable(ofProxyNamed: "photos.example", scheme: "http") == nil)
    }
}
