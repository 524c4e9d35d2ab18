//! What a TLS connection checks of the server's certificate, by `sslmode`.

use std::path::PathBuf;
use std::sync::Arc;

use ratchet_store::{Result, StoreError};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls13_signature_with_raw_key, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, SubjectPublicKeyInfoDer, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, OtherError, PeerMisbehaved,
    RootCertStore, SignatureScheme,
};

use super::Mode;

/// The TLS settings of `mode`, trusting the roots of `rootcert` (a PEM file, or `system`)
/// where the mode checks the certificate.
///
/// # Errors
///
/// [`StoreError::Invalid`] for a root file that cannot be read or no trusted root at all.
pub(super) fn client_config(mode: Mode, rootcert: Option<String>) -> Result<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Invalid(format!("TLS: {e}")))?;
    let verifier: Arc<dyn ServerCertVerifier> = match mode {
        // Encrypts; checks nothing about who answers (libpq's `allow`, `prefer`, `require`).
        Mode::Disable | Mode::Allow | Mode::Prefer | Mode::Require => {
            Arc::new(AnyCertificate(provider))
        }
        Mode::VerifyCa | Mode::VerifyFull => {
            let roots = Arc::new(roots(rootcert)?);
            let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
                .build()
                .map_err(|e| StoreError::Invalid(format!("TLS: {e}")))?;
            Arc::new(Trusted {
                webpki,
                names: mode == Mode::VerifyFull,
            })
        }
    };
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
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

/// Accepts any certificate: encryption without authentication, as libpq's `allow`, `prefer`
/// and `require`. The handshake's signatures are still checked against the certificate's
/// key, read from any X.509 version: a self-signed v1 certificate (as Citus makes for
/// itself) is as good as any other here, though webpki reads only v3 end-entity
/// certificates.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl AnyCertificate {
    /// The public key of `cert`, whatever its version: webpki's reader of trust anchors
    /// takes v1 certificates too and checks nothing else.
    fn key(
        cert: &CertificateDer<'_>,
    ) -> std::result::Result<SubjectPublicKeyInfoDer<'static>, rustls::Error> {
        let anchor =
            webpki::anchor_from_trusted_cert(cert).map_err(|_| CertificateError::BadEncoding)?;
        Ok(webpki::spki_for_anchor(&anchor))
    }
}

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

    /// As rustls's own check of TLS 1.2: each algorithm the scheme may mean, until one fits
    /// the key.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        let spki = Self::key(cert)?;
        let key = webpki::RawPublicKeyEntity::try_from(&spki)
            .map_err(|_| CertificateError::BadEncoding)?;
        let algorithms = self
            .0
            .signature_verification_algorithms
            .mapping
            .iter()
            .find(|(scheme, _)| *scheme == dss.scheme)
            .map(|(_, algorithms)| *algorithms)
            .ok_or(PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme)?;
        for algorithm in algorithms {
            match key.verify_signature(*algorithm, message, dss.signature()) {
                Ok(()) => return Ok(HandshakeSignatureValid::assertion()),
                Err(webpki::Error::UnsupportedSignatureAlgorithmForPublicKeyContext(_)) => {}
                Err(_) => return Err(CertificateError::BadSignature.into()),
            }
        }
        Err(CertificateError::BadSignature.into())
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature_with_raw_key(
            message,
            &Self::key(cert)?,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Checks that the certificate chains to a trusted root and, with `names` (`verify-full`),
/// that it names the host connected to (`verify-ca` checks the chain only).
#[derive(Debug)]
struct Trusted {
    webpki: Arc<WebPkiServerVerifier>,
    names: bool,
}

impl ServerCertVerifier for Trusted {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self
            .webpki
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.names => Ok(ServerCertVerified::assertion()),
            Err(rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(e))))
                if matches!(
                    e.downcast_ref::<webpki::Error>(),
                    Some(webpki::Error::UnsupportedCertVersion)
                ) =>
            {
                Err(rustls::Error::General(
                    "the server's certificate is not X.509 v3, so sslmode verify-ca and \
                     verify-full cannot check it (require encrypts without checking; a \
                     certificate from a CA is v3)"
                        .into(),
                ))
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}
