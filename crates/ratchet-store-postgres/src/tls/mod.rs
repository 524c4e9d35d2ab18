//! TLS to PostgreSQL, with libpq's meaning of a connection string's `sslmode` and
//! `sslrootcert`, over rustls (nothing to install beside the binary).
//!
//! - `disable`: no TLS.
//! - `prefer` (the default): TLS when the server offers it, without checking its certificate.
//! - `require`: TLS or no connection, without checking the certificate; with `sslrootcert`,
//!   as `verify-ca` (as libpq does).
//! - `verify-ca`: the certificate must chain to a trusted root: `sslrootcert` (a PEM file),
//!   else the system's roots (also `sslrootcert=system`).
//! - `verify-full`: as `verify-ca`, and the certificate must name the host connected to.

use std::path::PathBuf;
use std::sync::Arc;

use ratchet_store::{Result, StoreError};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// How much of the server's certificate is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// The connection settings of `url` (`postgres://...` or `key=value ...`) and the TLS
/// connector its `sslmode` and `sslrootcert` ask for.
///
/// # Errors
///
/// [`StoreError::Invalid`] for a connection string the driver cannot read, an unknown
/// `sslmode`, or a root certificate file that cannot be read.
pub(crate) fn parse(url: &str) -> Result<(tokio_postgres::Config, MakeRustlsConnect)> {
    let (rest, sslmode, rootcert) = take_tls_settings(url);
    let mode = match sslmode.as_deref() {
        None | Some("prefer") | Some("allow") => Mode::Prefer,
        Some("disable") => Mode::Disable,
        Some("require") if rootcert.is_some() => Mode::VerifyCa,
        Some("require") => Mode::Require,
        Some("verify-ca") => Mode::VerifyCa,
        Some("verify-full") => Mode::VerifyFull,
        Some(other) => {
            return Err(StoreError::Invalid(format!(
                "database URL: sslmode \"{other}\" is not one of disable, allow, prefer, require, verify-ca, verify-full"
            )))
        }
    };
    let mut config: tokio_postgres::Config = rest
        .parse()
        .map_err(|e| StoreError::Invalid(format!("database URL: {e}")))?;
    config.ssl_mode(match mode {
        Mode::Disable => SslMode::Disable,
        Mode::Prefer => SslMode::Prefer,
        _ => SslMode::Require,
    });
    Ok((
        config,
        MakeRustlsConnect::new(client_config(mode, rootcert)?),
    ))
}

/// A connection string as people may see it: user, hosts, ports and database, read with the
/// driver's own parser, and never a password, whichever way it was given (`user:pw@` in a
/// URL, `?password=`, `password=` in key-value form). A string the driver cannot read is not
/// echoed at all.
pub fn describe(url: &str) -> String {
    let Ok((config, _)) = parse(url) else {
        return "(a connection string that cannot be read)".into();
    };
    let user = config
        .get_user()
        .map(|u| format!("{u}@"))
        .unwrap_or_default();
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let host = match host {
                tokio_postgres::config::Host::Tcp(name) => name.clone(),
                tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
            };
            match ports.get(i).or(ports.first()) {
                Some(port) => format!("{host}:{port}"),
                None => host,
            }
        })
        .collect();
    let db = config.get_dbname().unwrap_or_default();
    format!("postgres://{user}{}/{db}", hosts.join(","))
}

fn client_config(mode: Mode, rootcert: Option<String>) -> Result<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Invalid(format!("TLS: {e}")))?;
    let config = match mode {
        // Encrypts; checks nothing about who answers (libpq's `prefer` and `require`).
        Mode::Disable | Mode::Prefer | Mode::Require => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth(),
        Mode::VerifyCa | Mode::VerifyFull => {
            let roots = Arc::new(roots(rootcert)?);
            let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
                .build()
                .map_err(|e| StoreError::Invalid(format!("TLS: {e}")))?;
            if mode == Mode::VerifyFull {
                builder.with_webpki_verifier(webpki).with_no_client_auth()
            } else {
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(ChainOnly(webpki)))
                    .with_no_client_auth()
            }
        }
    };
    Ok(config)
}

/// The trusted roots: those of the PEM file `rootcert`, or the system's.
fn roots(rootcert: Option<String>) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    match rootcert.filter(|r| r != "system") {
        Some(path) => {
            let path = PathBuf::from(path);
            let unreadable = |e: &dyn std::fmt::Display| {
                StoreError::Invalid(format!("sslrootcert {}: {e}", path.display()))
            };
            for cert in CertificateDer::pem_file_iter(&path).map_err(|e| unreadable(&e))? {
                roots
                    .add(cert.map_err(|e| unreadable(&e))?)
                    .map_err(|e| unreadable(&e))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                // A root the system has but rustls cannot use is skipped, as libpq would.
                let _ = roots.add(cert);
            }
        }
    }
    if roots.is_empty() {
        return Err(StoreError::Invalid(
            "sslmode verify-ca or verify-full: no trusted root certificate found (give sslrootcert)"
                .into(),
        ));
    }
    Ok(roots)
}

/// Removes `sslmode` and `sslrootcert` from a connection string (the driver knows the first
/// only partly and refuses the second) and returns their values.
fn take_tls_settings(url: &str) -> (String, Option<String>, Option<String>) {
    let (mut sslmode, mut rootcert) = (None, None);
    let mut take = |key: &str, value: String| match key {
        "sslmode" => {
            sslmode = Some(value);
            true
        }
        "sslrootcert" => {
            rootcert = Some(value);
            true
        }
        _ => false,
    };
    let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        match url.split_once('?') {
            Some((base, query)) => {
                let kept: Vec<&str> = query
                    .split('&')
                    .filter(|pair| {
                        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                        !take(key, percent_decode(value))
                    })
                    .collect();
                if kept.is_empty() {
                    base.to_string()
                } else {
                    format!("{base}?{}", kept.join("&"))
                }
            }
            None => url.to_string(),
        }
    } else {
        key_value_pairs(url)
            .into_iter()
            .filter(|(key, value, _)| !take(key, value.clone()))
            .map(|(_, _, raw)| raw)
            .collect::<Vec<_>>()
            .join(" ")
    };
    (rest, sslmode, rootcert)
}

/// The `key=value` pairs of a libpq key-value string: key, unquoted value, and the pair as
/// written.
fn key_value_pairs(text: &str) -> Vec<(String, String, String)> {
    let mut pairs = Vec::new();
    let mut chars = text.char_indices().peekable();
    loop {
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some(&(start, _)) = chars.peek() else {
            break;
        };
        let mut key = String::new();
        while let Some((_, c)) = chars.next_if(|(_, c)| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if(|(_, c)| *c == '=').is_some() {
            while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
            if chars.next_if(|(_, c)| *c == '\'').is_some() {
                while let Some((_, c)) = chars.next() {
                    match c {
                        '\\' => value.extend(chars.next().map(|(_, c)| c)),
                        '\'' => break,
                        c => value.push(c),
                    }
                }
            } else {
                while let Some((_, c)) = chars.next_if(|(_, c)| !c.is_whitespace()) {
                    value.push(c);
                }
            }
        }
        let end = chars.peek().map_or(text.len(), |(i, _)| *i);
        pairs.push((key, value, text[start..end].trim_end().to_string()));
    }
    pairs
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Accepts any certificate (the handshake's signatures are still checked): encryption
/// without authentication, as libpq's `prefer` and `require`.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Checks that the certificate chains to a trusted root, whatever host it names
/// (`verify-ca`).
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_settings_leave_the_rest_of_a_url_alone() {
        let (rest, mode, root) = take_tls_settings(
            "postgres://u:p@h:5432/db?sslmode=verify-full&application_name=x&sslrootcert=%2Ftmp%2Fca.pem",
        );
        assert_eq!(rest, "postgres://u:p@h:5432/db?application_name=x");
        assert_eq!(mode.as_deref(), Some("verify-full"));
        assert_eq!(root.as_deref(), Some("/tmp/ca.pem"));
        let (rest, mode, root) = take_tls_settings("postgres://h/db?sslmode=require");
        assert_eq!(
            (rest.as_str(), mode.as_deref(), root),
            ("postgres://h/db", Some("require"), None)
        );
    }

    #[test]
    fn tls_settings_leave_the_rest_of_key_values_alone() {
        let (rest, mode, root) = take_tls_settings(
            "host=h user=u password='a b\\'c' sslmode = verify-ca sslrootcert='/tmp/my ca.pem' dbname=d",
        );
        assert_eq!(rest, "host=h user=u password='a b\\'c' dbname=d");
        assert_eq!(mode.as_deref(), Some("verify-ca"));
        assert_eq!(root.as_deref(), Some("/tmp/my ca.pem"));
        assert!(rest.parse::<tokio_postgres::Config>().is_ok());
    }

    #[test]
    fn passwords_are_never_described() {
        for url in [
            "postgres://app:s3cret@db.example:6543/orders",
            "postgres://app@db.example:6543/orders?password=s3cret",
            "host=db.example port=6543 user=app password=s3cret dbname=orders",
            "host=db.example port=6543 user=app password='s3 cret' dbname=orders",
        ] {
            let described = describe(url);
            assert!(!described.contains("s3"), "{url}: {described}");
            assert_eq!(described, "postgres://app@db.example:6543/orders", "{url}");
        }
        assert_eq!(
            describe("postgres://app:s3cret@[bad"),
            "(a connection string that cannot be read)"
        );
    }

    #[test]
    fn modes_are_checked() {
        assert!(parse("postgres://h/db?sslmode=require").is_ok());
        assert!(parse("postgres://h/db").is_ok());
        assert!(matches!(
            parse("postgres://h/db?sslmode=bogus"),
            Err(StoreError::Invalid(m)) if m.contains("bogus")
        ));
        assert!(matches!(
            parse("postgres://h/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem"),
            Err(StoreError::Invalid(m)) if m.contains("/nonexistent/ca.pem")
        ));
    }
}
