//! The proxy HTTPS requests go through: `HTTPS_PROXY` (or `ALL_PROXY`) and `NO_PROXY`, upper or lower
//! case, read once per process the way curl reads them. OpenShift's cluster-wide proxy and OADP set
//! exactly these on the Velero Deployment, and a plugin inherits them.
//!
//! HTTPS goes through an HTTP `CONNECT` tunnel, so TLS still runs end to end with the granted host
//! (and the grant still names that host, not the proxy). Credentials in the proxy URL
//! (`http://user:password@proxy:3128`) are sent as `Proxy-Authorization: Basic` and never logged.
//! Plain `http://` origins — granted only explicitly, for loopback and on-premises endpoints — are
//! always reached directly.

use hyper::header::HeaderValue;
use hyper::Uri;
use hyper_util::client::proxy::matcher::Matcher;

/// Where HTTPS requests go, from the process's environment.
pub struct ProxyRules {
    matcher: Matcher,
}

/// A proxy the environment names that this transport cannot use.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// A proxy URL without a scheme or host.
    #[error("the HTTPS proxy {0} has no host")]
    NoHost(Uri),
    /// A proxy spoken to over TLS.
    #[error("the HTTPS proxy {scheme}://{host} is not supported: name it http://{host}:PORT (HTTPS still runs end to end through its CONNECT tunnel)")]
    Scheme {
        /// The proxy's scheme.
        scheme: String,
        /// The proxy's host.
        host: String,
    },
    /// A host and port that do not make a URI.
    #[error("the HTTPS proxy {host}:{port}: {source}")]
    Origin {
        /// The proxy's host.
        host: String,
        /// The proxy's port.
        port: u16,
        /// Why they do not.
        source: hyper::http::uri::InvalidUri,
    },
}

/// The proxy one request goes through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proxy {
    /// `http://host:port`, without credentials: what connections go to and what logs show.
    pub origin: Uri,
    /// `Basic …` for `Proxy-Authorization`, from credentials in the proxy URL.
    pub authorization: Option<HeaderValue>,
}

impl Proxy {
    /// `http://host:port`, for messages.
    pub fn name(&self) -> String {
        match self.origin.authority() {
            Some(authority) => format!("http://{authority}"),
            None => self.origin.to_string(),
        }
    }
}

impl ProxyRules {
    /// The rules of `HTTPS_PROXY`/`https_proxy`, `ALL_PROXY`/`all_proxy` and `NO_PROXY`/`no_proxy`.
    pub fn from_env() -> ProxyRules {
        ProxyRules {
            matcher: Matcher::from_env(),
        }
    }

    /// Rules from explicit values (`https` as `HTTPS_PROXY` would hold it, `no` as `NO_PROXY`).
    #[cfg(test)]
    pub fn new(https: &str, no: &str) -> ProxyRules {
        ProxyRules {
            matcher: Matcher::builder().https(https).no(no).build(),
        }
    }

    /// The proxy for `url`, if it goes through one; an error for a proxy this transport cannot use.
    pub fn route(&self, url: &Uri) -> Result<Option<Proxy>, ProxyError> {
        if url.scheme_str() != Some("https") {
            return Ok(None);
        }
        let Some(intercept) = self.matcher.intercept(url) else {
            return Ok(None);
        };
        let proxy = intercept.uri();
        let (Some(scheme), Some(host)) = (proxy.scheme_str(), proxy.host()) else {
            return Err(ProxyError::NoHost(proxy.clone()));
        };
        if scheme != "http" {
            return Err(ProxyError::Scheme {
                scheme: scheme.to_string(),
                host: host.to_string(),
            });
        }
        let port = proxy.port_u16().unwrap_or(80);
        let origin =
            format!("http://{host}:{port}")
                .parse()
                .map_err(|source| ProxyError::Origin {
                    host: host.to_string(),
                    port,
                    source,
                })?;
        Ok(Some(Proxy {
            origin,
            authorization: intercept.basic_auth().cloned(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(rules: &ProxyRules, url: &str) -> Result<Option<Proxy>, String> {
        rules
            .route(&url.parse().unwrap())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn https_goes_through_the_proxy_unless_no_proxy_names_the_host() {
        let rules = ProxyRules::new(
            "http://proxy.corp:3128",
            "localhost,.svc,10.0.0.0/8,blob.internal",
        );
        let via = route(&rules, "https://sts.amazonaws.com/x")
            .unwrap()
            .unwrap();
        assert_eq!(via.origin, "http://proxy.corp:3128");
        assert_eq!(via.name(), "http://proxy.corp:3128");
        assert_eq!(via.authorization, None);
        for direct in [
            "https://localhost:9443/",
            "https://minio.velero.svc/",
            "https://10.1.2.3/",
            "https://blob.internal/",
            "http://sts.amazonaws.com/",
        ] {
            assert_eq!(route(&rules, direct), Ok(None), "{direct}");
        }
    }

    #[test]
    fn credentials_become_a_basic_header_and_leave_the_origin() {
        let rules = ProxyRules::new("http://svc-backup:s3cr%40t@proxy.corp:8080", "");
        let via = route(&rules, "https://login.microsoftonline.com/")
            .unwrap()
            .unwrap();
        assert_eq!(via.origin, "http://proxy.corp:8080");
        // base64("svc-backup:s3cr@t")
        assert_eq!(via.authorization.unwrap(), "Basic c3ZjLWJhY2t1cDpzM2NyQHQ=");
    }

    #[test]
    fn a_proxy_without_scheme_or_port_is_plain_http_on_80_and_a_tls_proxy_is_refused() {
        let via = route(
            &ProxyRules::new("proxy.corp", ""),
            "https://sts.amazonaws.com/",
        )
        .unwrap()
        .unwrap();
        assert_eq!(via.origin, "http://proxy.corp:80");
        let e = route(
            &ProxyRules::new("https://proxy.corp:3129", ""),
            "https://sts.amazonaws.com/",
        )
        .unwrap_err();
        assert!(e.contains("https://proxy.corp is not supported"), "{e}");
    }

    #[test]
    fn no_proxy_rules_means_direct() {
        assert_eq!(
            route(&ProxyRules::new("", ""), "https://sts.amazonaws.com/"),
            Ok(None)
        );
    }
}
