import Foundation

/// The proxies libcurl takes from the environment, as curl does: for http
/// URLs `http_proxy` (lower case only), for https URLs `https_proxy` or
/// `HTTPS_PROXY`, and else `all_proxy` or `ALL_PROXY`. Read once, to name
/// the proxy in a failure: libcurl's "Failed to connect to 127.0.0.1 port 1"
/// did not say that this was the proxy, nor where it came from.
struct ProxyEnvironment: Sendable {
    /// A proxy as a variable gives it.
    struct Proxy: Sendable, Equatable {
        let variable: String
        let host: String
        let port: Int

        /// `the proxy HOST:PORT, from $VARIABLE`.
        var described: String { "the proxy \(host):\(port), from $\(variable)" }
    }

    private let http: Proxy?
    private let https: Proxy?

    init(_ environment: [String: String] = ProcessInfo.processInfo.environment) {
        func first(_ names: [String]) -> Proxy? {
            for name in names {
                if let value = environment[name], !value.isEmpty { return Self.parse(value, variable: name) }
            }
            return nil
        }
        http = first(["http_proxy", "all_proxy", "ALL_PROXY"])
        https = first(["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"])
    }

    /// The proxy a URL with `scheme` goes through, if the environment names one
    /// (`no_proxy` is not looked at: see `named(in:scheme:)`).
    func proxy(forScheme scheme: String) -> Proxy? {
        scheme == "https" ? https : http
    }

    /// `message` with the proxy named, when it is libcurl's failure to
    /// connect to exactly the proxy's host and port (so a URL `no_proxy`
    /// exempts, which fails on its own host, is left as it is).
    func named(in message: String, scheme: String) -> String {
        guard let proxy = unreached(in: message, scheme: scheme) else { return message }
        return "\(message) (\(proxy.described))"
    }

    /// The proxy `message` (libcurl's) failed to connect to, when it is the
    /// one a URL with `scheme` goes through (see `named(in:scheme:)`).
    func unreached(in message: String, scheme: String) -> Proxy? {
        guard let proxy = proxy(forScheme: scheme), let target = Self.connectTarget(message),
              target.host.lowercased() == proxy.host.lowercased(), target.port == proxy.port else { return nil }
        return proxy
    }

    /// The variable naming the proxy a URL with `scheme` goes through, when
    /// that proxy's host is `name` (see `named(in:scheme:)` for `no_proxy`).
    func variable(ofProxyNamed name: String, scheme: String) -> String? {
        guard let proxy = proxy(forScheme: scheme), proxy.host.lowercased() == name.lowercased() else { return nil }
        return proxy.variable
    }

    /// Host and port of libcurl's "Failed to connect to HOST port PORT after …".
    static func connectTarget(_ message: String) -> (host: String, port: Int)? {
        guard let start = message.range(of: "Failed to connect to ") else { return nil }
        let rest = message[start.upperBound...]
        guard let portWord = rest.range(of: " port ") else { return nil }
        let host = rest[..<portWord.lowerBound]
        let digits = rest[portWord.upperBound...].prefix { $0.isASCII && $0.isNumber }
        guard !host.isEmpty, let port = Int(digits) else { return nil }
        return (String(host), port)
    }

    /// A proxy variable's value: `[scheme://][user[:password]@]host[:port][/]`,
    /// with libcurl's default ports (1080, or 443 for an https proxy).
    static func parse(_ value: String, variable: String) -> Proxy? {
        var rest = Substring(value.trimmingCharacters(in: .whitespaces))
        var scheme = "http"
        if let separator = rest.range(of: "://") {
            scheme = rest[..<separator.lowerBound].lowercased()
            rest = rest[separator.upperBound...]
        }
        rest = rest.prefix { $0 != "/" }
        if let at = rest.lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        var host = rest
        var port = scheme == "https" ? 443 : 1080
        if rest.hasPrefix("["), let close = rest.firstIndex(of: "]") {
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":"), let number = Int(after.dropFirst()) { port = number }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            if let number = Int(rest[rest.index(after: colon)...]) { port = number }
        }
        guard !host.isEmpty else { return nil }
        return Proxy(variable: variable, host: String(host), port: port)
    }
}
