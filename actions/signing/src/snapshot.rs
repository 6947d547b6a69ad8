//! What a snapshot URL is (docs/hcp.md#s5-4) and its parts: `s3://bucket/key` (#s5-6 step 1) or an Azure Blob
//! URL (docs/hcp.md#s5-7 step 1). Anything else is used unsigned.

use percent_encoding::percent_decode_str;

use crate::error::Error;

/// A classified snapshot URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotUrl {
    /// Bucket and decoded key.
    S3 {
        /// Bucket (URL host, with a port if present).
        bucket: String,
        /// Key, percent-decoded, without its leading `/`.
        key: String,
    },
    /// Account, container, decoded blob name.
    AzureBlob {
        /// Storage account (host before `.blob.`).
        account: String,
        /// Container.
        container: String,
        /// Blob name.
        blob: String,
    },
    /// Not signable: used as it is.
    Unsigned,
}

/// Classifies a URL and extracts its parts.
pub fn parse(url: &str) -> Result<SnapshotUrl, Error> {
    if url.starts_with("s3://") {
        return parse_s3(url).map_err(|e| e.context(&format!("error parsing S3 URL {url:?}")));
    }
    if is_azure_blob(url) {
        return parse_azure(url)
            .map_err(|e| e.context(&format!("error parsing Azure Blob URL {url:?}")));
    }
    Ok(SnapshotUrl::Unsigned)
}

/// `s3://bucket/key`: the bucket is the host (with port), the key the decoded path without `/`.
pub fn parse_s3(url: &str) -> Result<SnapshotUrl, Error> {
    if url.is_empty() {
        return Err(Error::Invalid("empty S3 URL".into()));
    }
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| Error::Invalid(format!("invalid S3 URL {url:?}: missing scheme")))?;
    if scheme != "s3" {
        return Err(Error::Invalid(format!(
            "expected s3:// scheme, got {scheme:?}"
        )));
    }
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let (bucket, path) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(Error::Invalid(format!("missing bucket in S3 URL {url:?}")));
    }
    let key = decode(path).map_err(|e| Error::Invalid(format!("invalid S3 URL {url:?}: {e}")))?;
    if key.is_empty() {
        return Err(Error::Invalid(format!("missing key in S3 URL {url:?}")));
    }
    Ok(SnapshotUrl::S3 {
        bucket: bucket.to_string(),
        key,
    })
}

/// Whether a URL is an Azure Blob URL: `http(s)` with `.blob.` in its host name after the first character.
pub fn is_azure_blob(url: &str) -> bool {
    match url::Url::parse(url) {
        Ok(u) => {
            matches!(u.scheme(), "http" | "https")
                && u.host_str()
                    .and_then(|h| h.find(".blob."))
                    .is_some_and(|i| i > 0)
        }
        Err(_) => false,
    }
}

/// `https://<account>.blob.<suffix>/<container>/<blob>`.
pub fn parse_azure(url: &str) -> Result<SnapshotUrl, Error> {
    if url.is_empty() {
        return Err(Error::Invalid("empty Azure Blob URL".into()));
    }
    let parsed = url::Url::parse(url)
        .map_err(|e| Error::Invalid(format!("invalid Azure Blob URL {url:?}: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(Error::Invalid(format!(
            "expected https:// or http:// scheme, got {:?}",
            parsed.scheme()
        )));
    }
    let host = parsed.host_str().unwrap_or("");
    let account = match host.find(".blob.") {
        Some(i) if i > 0 => &host[..i],
        _ => {
            return Err(Error::Invalid(format!(
                "hostname {host:?} does not match <account>.blob.<suffix> pattern"
            )))
        }
    };
    let path = decode(parsed.path())
        .map_err(|e| Error::Invalid(format!("invalid Azure Blob URL {url:?}: {e}")))?;
    if path.is_empty() {
        return Err(Error::Invalid(format!(
            "missing container and blob in URL {url:?}"
        )));
    }
    let (container, blob) = path
        .split_once('/')
        .ok_or_else(|| Error::Invalid(format!("missing blob path in URL {url:?}")))?;
    if container.is_empty() {
        return Err(Error::Invalid(format!(
            "missing container and blob in URL {url:?}"
        )));
    }
    if blob.is_empty() {
        return Err(Error::Invalid(format!("empty blob path in URL {url:?}")));
    }
    Ok(SnapshotUrl::AzureBlob {
        account: account.to_string(),
        container: container.to_string(),
        blob: blob.to_string(),
    })
}

/// A path, percent-decoded as UTF-8, without its leading `/`. A `%` not followed by two hex digits
/// is an error, as in Go's URL parser.
fn decode(path: &str) -> Result<String, String> {
    let bytes = path.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'%'
            && !(bytes.len() > i + 2
                && bytes[i + 1].is_ascii_hexdigit()
                && bytes[i + 2].is_ascii_hexdigit())
        {
            return Err(format!(
                "invalid URL escape {:?}",
                &path[i..(i + 3).min(path.len())]
            ));
        }
    }
    let decoded = percent_decode_str(path)
        .decode_utf8()
        .map_err(|e| format!("the path is not UTF-8: {e}"))?;
    Ok(decoded.strip_prefix('/').unwrap_or(&decoded).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s3(bucket: &str, key: &str) -> SnapshotUrl {
        SnapshotUrl::S3 {
            bucket: bucket.into(),
            key: key.into(),
        }
    }

    #[test]
    fn s3_urls() {
        assert_eq!(
            parse("s3://my-bucket/path/to/snapshot.db").unwrap(),
            s3("my-bucket", "path/to/snapshot.db")
        );
        assert_eq!(
            parse("s3://bucket/path/to/snap%20shot.db").unwrap(),
            s3("bucket", "path/to/snap shot.db")
        );
        assert_eq!(
            parse("s3://minio:9000/k?x=1#f").unwrap(),
            s3("minio:9000", "k")
        );
        for bad in [
            "s3://my-bucket",
            "s3://my-bucket/",
            "s3:///key",
            "s3://b/%zz",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(parse_s3("https://bucket/key")
            .unwrap_err()
            .to_string()
            .contains("expected s3:// scheme, got \"https\""));
        assert_eq!(parse_s3("").unwrap_err().to_string(), "empty S3 URL");
        let e = parse("s3://my-bucket/").unwrap_err().to_string();
        assert_eq!(
            e,
            "error parsing S3 URL \"s3://my-bucket/\": missing key in S3 URL \"s3://my-bucket/\""
        );
    }

    #[test]
    fn azure_blob_detection() {
        for yes in [
            "https://myaccount.blob.core.windows.net/container/blob",
            "https://myaccount.blob.core.usgovcloudapi.net/container/blob",
            "https://myaccount.blob.core.chinacloudapi.cn/container/blob",
            "http://devaccount.blob.core.windows.net/container/blob",
            "https://myaccount.blob.core.windows.net/container",
        ] {
            assert!(is_azure_blob(yes), "{yes}");
        }
        for no in [
            "s3://bucket/key",
            "https://my-bucket.s3.us-east-1.amazonaws.com/path/to/snapshot.db",
            "https://example.com/path",
            "",
            "not-a-url",
            "ftp://myaccount.blob.core.windows.net/c/b",
            "https://.blob.core.windows.net/c/b",
        ] {
            assert!(!is_azure_blob(no), "{no}");
        }
    }

    #[test]
    fn azure_blob_urls() {
        assert_eq!(
            parse("https://myaccount.blob.core.windows.net/mycontainer/path/to/snap%20shot.db?old=sas").unwrap(),
            SnapshotUrl::AzureBlob { account: "myaccount".into(), container: "mycontainer".into(), blob: "path/to/snap shot.db".into() }
        );
        let e = parse("https://myaccount.blob.core.windows.net/container")
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing blob path"), "{e}");
        let e = parse("https://myaccount.blob.core.windows.net/container/")
            .unwrap_err()
            .to_string();
        assert!(e.contains("empty blob path"), "{e}");
        assert!(parse_azure("https://example.com/c/b")
            .unwrap_err()
            .to_string()
            .contains("does not match"));
        assert_eq!(
            parse("https://example.com/c/b").unwrap(),
            SnapshotUrl::Unsigned
        );
        assert_eq!(
            parse("https://b.s3.us-east-1.amazonaws.com/k?X-Amz-Signature=abc").unwrap(),
            SnapshotUrl::Unsigned
        );
    }
}
