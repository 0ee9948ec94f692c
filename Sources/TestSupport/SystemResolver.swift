import Foundation

/// This machine's name resolver, as tests that need a name not to exist see it.
public enum SystemResolver {
    /// Whether the resolver answers that `name` does not exist (`EAI_NONAME`);
    /// false where it cannot say (no DNS server: `EAI_AGAIN`), or knows it.
    /// `.invalid` names are reserved never to exist.
    public static func saysNoSuchName(_ name: String) -> Bool {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(name, nil, &hints, &found)
        if let found { freeaddrinfo(found) }
        return status == EAI_NONAME
    }

    /// The resolver's settings for a run whose lookups must not take long:
    /// a query this machine's resolver drops (it drops queries past a burst)
    /// is asked again after 1 s, not glibc's 5 s, within the 2 s mediafetch
    /// waits for its own lookup of a name that did not resolve.
    public static let quickRetries = ["RES_OPTIONS": "timeout:1 attempts:4"]
}
