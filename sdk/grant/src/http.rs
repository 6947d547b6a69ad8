//! The HTTP part of a grant: the origins a module may reach (`[grant] http`).

/// One entry of a module's HTTP grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostRule {
    /// HTTPS on port 443 to exactly this host.
    Exact(String),
    /// HTTPS on port 443 to any host ending in this suffix (which starts with `.`).
    Suffix(String),
    /// Exactly this scheme, host and port.
    Origin {
        /// `http` or `https`.
        scheme: String,
        /// Host name or IP literal, lower case.
        host: String,
        /// Port.
        port: u16,
    },
}

impl HostRule {
    /// Parses a grant entry; the error says what is wrong with it.
    pub fn parse(entry: &str) -> Result<HostRule, String> {
        let bad = |why: &str| {
            format!("{entry:?} {why}; expected a host name, *.suffix, or http(s)://host:port")
        };
        let valid_host = |h: &str| {
            !h.is_empty()
                && h.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
                && !h.starts_with('.')
                && !h.ends_with('.')
        };
        if let Some((scheme, rest)) = entry.split_once("://") {
            if !matches!(scheme, "http" | "https") {
                return Err(bad("has a scheme other than http or https"));
            }
            let rest = rest.strip_suffix('/').unwrap_or(rest);
            let (host, port) = match rest.rsplit_once(':') {
                Some((host, port)) => (
                    host,
                    port.parse::<u16>()
                        .map_err(|_| bad("has an invalid port"))?,
                ),
                None => (rest, if scheme == "http" { 80 } else { 443 }),
            };
            if !valid_host(host) {
                return Err(bad("has an invalid host"));
            }
            return Ok(HostRule::Origin {
                scheme: scheme.to_string(),
                host: host.to_ascii_lowercase(),
                port,
            });
        }
        if let Some(suffix) = entry.strip_prefix("*.") {
            if !valid_host(suffix) || !suffix.contains('.') {
                return Err(bad("is not a valid wildcard"));
            }
            return Ok(HostRule::Suffix(format!(
                ".{}",
                suffix.to_ascii_lowercase()
            )));
        }
        if !valid_host(entry) {
            return Err(bad("is not a valid host name"));
        }
        Ok(HostRule::Exact(entry.to_ascii_lowercase()))
    }

    /// Whether a request to `scheme://host:port` (host in lower case) is within this entry.
    pub fn allows(&self, scheme: &str, host: &str, port: u16) -> bool {
        match self {
            HostRule::Exact(h) => scheme == "https" && port == 443 && host == h,
            HostRule::Suffix(s) => {
                scheme == "https"
                    && port == 443
                    && host.len() > s.len()
                    && host.ends_with(s.as_str())
            }
            HostRule::Origin {
                scheme: s,
                host: h,
                port: p,
            } => scheme == s && host == h && port == *p,
        }
    }
}
