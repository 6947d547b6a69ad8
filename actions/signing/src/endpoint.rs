//! Custom endpoints (`s3Url`, `storageAccountURI`): their scheme and `host[:port]`, and for Blob
//! storage their path too (Azurite's `http://127.0.0.1:10000/devstoreaccount1`).

use crate::error::Error;

/// A parsed endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `http` or `https`.
    pub scheme: String,
    /// `host[:port]` (the port only when it is not the scheme's default).
    pub authority: String,
    /// The path, without a trailing `/` ("" for none).
    pub path: String,
}

impl Endpoint {
    /// Parses `scheme://host[:port][/path]`. Unlike the original, an endpoint without an
    /// `http`/`https` scheme is refused instead of yielding a malformed URL.
    pub fn parse(text: &str) -> Result<Endpoint, Error> {
        let invalid = |why: &str| Error::Invalid(format!("invalid endpoint {text:?}: {why}"));
        let trimmed = text.trim_end_matches('/');
        let url = url::Url::parse(trimmed)
            .map_err(|e| invalid(&format!("{e} (expected http(s)://host[:port])")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid("expected http(s)://host[:port]"));
        }
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| invalid("no host"))?;
        let authority = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_string(),
        };
        Ok(Endpoint {
            scheme: url.scheme().to_string(),
            authority,
            path: url.path().trim_end_matches('/').to_string(),
        })
    }

    /// `scheme://host[:port]` (S3: the endpoint's path is ignored, as the original does).
    pub fn base(&self) -> String {
        format!("{}://{}", self.scheme, self.authority)
    }

    /// `scheme://host[:port][/path]`: where a Blob service lives. The original drops the path
    /// (docs/signing.md#s6-5 step 6, [defect?]), which breaks path-style accounts such as Azurite's; the
    /// signature does not depend on it.
    pub fn root(&self) -> String {
        format!("{}{}", self.base(), self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_scheme_and_authority_only() {
        let e = Endpoint::parse("http://minio.example.com:9000/").unwrap();
        assert_eq!(
            (e.scheme.as_str(), e.authority.as_str()),
            ("http", "minio.example.com:9000")
        );
        let e = Endpoint::parse("http://127.0.0.1:10000/devstoreaccount1").unwrap();
        assert_eq!(e.base(), "http://127.0.0.1:10000");
        assert_eq!(e.root(), "http://127.0.0.1:10000/devstoreaccount1");
        assert_eq!(
            Endpoint::parse("https://acct.blob.core.windows.net/")
                .unwrap()
                .root(),
            "https://acct.blob.core.windows.net"
        );
        for bad in [
            "minio.example.com",
            "minio.example.com:9000",
            "127.0.0.1:9000",
            "ftp://x",
            "",
            "https://",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }
}
