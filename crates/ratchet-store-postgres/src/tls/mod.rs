//! TLS to PostgreSQL, with libpq's meaning of a connection string's `sslmode` and
//! `sslrootcert`, over rustls (nothing to install beside the binary).
//!
//! - `disable`: plain text only.
//! - `allow`: plain text; TLS, without checking the certificate, if the server refuses
//!   plain text.
//! - `prefer` (the default): TLS without checking the certificate when the server offers
//!   it; plain text if it does not, if the handshake fails or if the server refuses the
//!   encrypted connection.
//! - `require`: TLS or no connection, without checking the certificate; with `sslrootcert`,
//!   as `verify-ca`.
//! - `verify-ca`: the certificate must chain to a trusted root: `sslrootcert` (a PEM file),
//!   else the system's roots.
//! - `verify-full`: as `verify-ca`, and the certificate must name the host connected to.
//!   The mode `sslrootcert=system` asks for, and the only one it takes (libpq 16's rule:
//!   the system's roots vouch for anyone's name, so they prove nothing less).
//!
//! Only the connection string counts: no `PGSSLMODE`, no `~/.postgresql/root.crt`.

mod connect;
mod settings;
mod verify;

use ratchet_store::{Result, StoreError};

pub(crate) use connect::Tls;

/// How a connection is encrypted and how much of the server's certificate is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// The connection settings of `url` (`postgres://...` or `key=value ...`) and the way to
/// connect its `sslmode` and `sslrootcert` ask for.
///
/// # Errors
///
/// [`StoreError::Invalid`] for a connection string the driver cannot read, an unknown
/// `sslmode`, one weaker than `verify-full` with `sslrootcert=system`, or a root certificate
/// file that cannot be read.
pub(crate) fn parse(url: &str) -> Result<(tokio_postgres::Config, Tls)> {
    let (rest, sslmode, rootcert) = settings::take_tls_settings(url);
    let mode = mode(sslmode.as_deref(), rootcert.as_deref())?;
    let config: tokio_postgres::Config = rest
        .parse()
        .map_err(|e| StoreError::Invalid(format!("database URL: {e}")))?;
    Ok((
        config,
        Tls::new(mode, verify::client_config(mode, rootcert)?),
    ))
}

/// The mode a connection string's `sslmode` and `sslrootcert` ask for.
fn mode(sslmode: Option<&str>, rootcert: Option<&str>) -> Result<Mode> {
    let system = rootcert == Some("system");
    let mode = match sslmode {
        None if system => Mode::VerifyFull,
        None | Some("prefer") => Mode::Prefer,
        Some("allow") => Mode::Allow,
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
    match sslmode {
        Some(weak) if system && mode != Mode::VerifyFull => Err(StoreError::Invalid(format!(
            "database URL: sslmode \"{weak}\" is too weak for sslrootcert=system: use verify-full"
        ))),
        _ => Ok(mode),
    }
}

/// A connection string as people may see it: user, hosts, ports and database, read with the
/// driver's own parser, and never a password, whichever way it was given (`user:pw@` in a
/// URL, `?password=`, `password=` in key-value form). A string the driver cannot read is not
/// echoed at all.
pub fn describe(url: &str) -> String {
    // The driver's settings only: describing a string reads no certificate file.
    let (rest, _, _) = settings::take_tls_settings(url);
    let Ok(config) = rest.parse::<tokio_postgres::Config>() else {
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

#[cfg(test)]
mod tests {
    use super::*;

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
        // TLS settings the store would refuse still describe where it connects.
        assert_eq!(
            describe(
                "postgres://app:s3cret@db/orders?sslmode=verify-ca&sslrootcert=/nonexistent.pem"
            ),
            "postgres://app@db:5432/orders"
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

    #[test]
    fn modes_mean_what_they_mean_to_libpq() {
        let cases = [
            (None, None, Mode::Prefer),
            (Some("prefer"), None, Mode::Prefer),
            (Some("allow"), None, Mode::Allow),
            (Some("disable"), None, Mode::Disable),
            (Some("require"), None, Mode::Require),
            (Some("require"), Some("/etc/ca.pem"), Mode::VerifyCa),
            (Some("verify-ca"), None, Mode::VerifyCa),
            (Some("verify-full"), Some("/etc/ca.pem"), Mode::VerifyFull),
            // libpq 16: the system's roots mean verify-full, and nothing weaker.
            (None, Some("system"), Mode::VerifyFull),
            (Some("verify-full"), Some("system"), Mode::VerifyFull),
        ];
        for (sslmode, rootcert, expected) in cases {
            assert_eq!(
                mode(sslmode, rootcert).ok(),
                Some(expected),
                "{sslmode:?} {rootcert:?}"
            );
        }
        for weak in ["disable", "allow", "prefer", "require", "verify-ca"] {
            assert!(matches!(
                mode(Some(weak), Some("system")),
                Err(StoreError::Invalid(m)) if m.contains(weak) && m.contains("verify-full")
            ));
        }
    }
}
