//! The TLS settings of a connection string, which the driver knows only partly: `sslmode`
//! (it has no `allow`, `verify-ca` or `verify-full`) and `sslrootcert` (it refuses it).

/// Removes `sslmode` and `sslrootcert` from a connection string (the driver knows the first
/// only partly and refuses the second) and returns their values.
pub(super) fn take_tls_settings(url: &str) -> (String, Option<String>, Option<String>) {
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
}
