//! The parts of a URL a module's HTTP grant is checked against, and how messages name its origin.

use crate::bindings::velero_wasm::plugin::http::Error;

/// The parts of a URL a grant is checked against.
pub(super) struct Target {
    pub(super) scheme: String,
    pub(super) host: String,
    pub(super) port: u16,
}

pub(super) fn target(url: &str) -> Result<Target, Error> {
    let uri: hyper::Uri = url
        .parse()
        .map_err(|e| Error::Invalid(format!("URL {}: {e}", origin_of(url))))?;
    let scheme = uri.scheme_str().unwrap_or("").to_ascii_lowercase();
    if !matches!(scheme.as_str(), "http" | "https") {
        return Err(Error::Invalid(format!(
            "URL {}: only http and https are supported",
            origin_of(url)
        )));
    }
    let authority = uri
        .authority()
        .ok_or_else(|| Error::Invalid(format!("URL {}: no host", origin_of(url))))?;
    if authority.as_str().contains('@') {
        return Err(Error::Invalid(
            "URLs with user information are not allowed".into(),
        ));
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let port = authority
        .port_u16()
        .unwrap_or(if scheme == "https" { 443 } else { 80 });
    Ok(Target { scheme, host, port })
}

/// `scheme://host[:port]` of a URL, for messages: never its path or query (which may carry a signature).
pub(super) fn origin_of(url: &str) -> String {
    let end = url.find("://").map(|i| i + 3).unwrap_or(0);
    let rest = &url[end..];
    let cut = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..cut];
    let authority = authority
        .rsplit_once('@')
        .map(|(_, a)| a)
        .unwrap_or(authority);
    format!("{}{authority}", &url[..end])
}

/// `scheme://host:port` of a URL, the port always written: how messages and logs name an origin.
pub(crate) fn origin(url: &str) -> String {
    match target(url) {
        Ok(t) => t.origin(),
        Err(_) => origin_of(url),
    }
}

impl Target {
    pub(super) fn origin(&self) -> String {
        format!("{}://{}:{}", self.scheme, self.host, self.port)
    }
}
