import Foundation

/// Files of CA certificates given with `--cacert`.
public enum CACertificates {
    /// Whether `contents` holds a PEM certificate, as libcurl's OpenSSL
    /// reads them (`-----BEGIN CERTIFICATE-----`, `TRUSTED CERTIFICATE`, `X509 CERTIFICATE`):
    /// an empty or garbled file is refused once, at the start, instead of
    /// failing every https URL with "error setting certificate file".
    public static func holdsPEMCertificate(_ contents: Data) -> Bool {
        ["-----BEGIN CERTIFICATE-----", "-----BEGIN TRUSTED CERTIFICATE-----", "-----BEGIN X509 CERTIFICATE-----"].contains {
            contents.range(of: Data($0.utf8)) != nil
        }
    }
}
