//! OCI references as a module ConfigMap names them: `registry/repository:tag@sha256:<hex>`, an
//! optional `oci://` in front. The registry is always written out (no Docker Hub default: a module
//! reference says where it comes from); `docker.io` is reached at `registry-1.docker.io`, as the
//! Docker clients do.

use std::fmt;

/// A parsed reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `host[:port]` as written.
    pub(crate) registry: String,
    /// The repository path (`team/modules/kubevirt`).
    pub(crate) repository: String,
    /// The tag, if one is written.
    pub tag: Option<String>,
    /// `sha256:<64 hex>`, if pinned.
    pub digest: Option<String>,
}

impl Reference {
    /// Parses `[oci://]registry/repository[:tag][@sha256:hex]`; a reference needs a tag or a digest.
    pub fn parse(text: &str) -> Result<Reference, ReferenceError> {
        let text = text.trim();
        let bare = text.strip_prefix("oci://").unwrap_or(text);
        let bad = |why: &'static str| ReferenceError {
            text: text.to_string(),
            why,
        };
        let (rest, digest) = match bare.split_once('@') {
            Some((rest, digest)) => {
                if !is_digest(digest) {
                    return Err(bad(
                        "the digest is not sha256: and 64 lower-case hex digits",
                    ));
                }
                (rest, Some(digest.to_string()))
            }
            None => (bare, None),
        };
        let (registry, path) = rest
            .split_once('/')
            .ok_or_else(|| bad("no registry: write registry/repository"))?;
        if registry.is_empty()
            || !registry
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b))
        {
            return Err(bad("the registry is not host[:port]"));
        }
        // A tag follows the last ':' after the last '/'.
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repository, tag)) if !tag.contains('/') => (repository, Some(tag)),
            _ => (path, None),
        };
        let component_ok = |c: &str| {
            !c.is_empty()
                && c.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
                && c.starts_with(|c: char| c.is_ascii_alphanumeric())
        };
        if repository.len() > 255 || !repository.split('/').all(component_ok) {
            return Err(bad(
                "the repository must be lower-case letters, digits, '.', '_', '-' and '/'",
            ));
        }
        if let Some(tag) = tag {
            let ok = tag.len() <= 128
                && tag.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                && tag
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
            if !ok {
                return Err(bad("the tag must be letters, digits, '.', '_' and '-'"));
            }
        }
        if tag.is_none() && digest.is_none() {
            return Err(bad("it names neither a tag nor a digest"));
        }
        Ok(Reference {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag: tag.map(str::to_string),
            digest,
        })
    }

    /// The host the registry API is reached at (`docker.io` is `registry-1.docker.io`).
    pub fn api_host(&self) -> &str {
        match self.registry.as_str() {
            "docker.io" | "index.docker.io" => "registry-1.docker.io",
            other => other,
        }
    }

    /// What the manifest is asked for by: the digest when pinned, else the tag.
    pub fn manifest_ref(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or("latest")
    }

    /// The same reference pinned to `digest`.
    pub fn pinned(&self, digest: &str) -> Reference {
        Reference {
            digest: Some(digest.to_string()),
            ..self.clone()
        }
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// Whether `text` is `sha256:` and 64 lower-case hex digits (the only digest algorithm accepted).
pub fn is_digest(text: &str) -> bool {
    text.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// A module reference that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not an OCI reference (registry/repository:tag@sha256:…): {why}")]
pub struct ReferenceError {
    /// The reference as written (trimmed).
    pub(crate) text: String,
    /// What is wrong with it.
    pub(crate) why: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn references_parse_with_tag_digest_or_both() {
        let r = Reference::parse(&format!("oci://127.0.0.1:5000/mods/kubevirt:1.2@{D}")).unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "mods/kubevirt");
        assert_eq!(r.tag.as_deref(), Some("1.2"));
        assert_eq!(r.digest.as_deref(), Some(D));
        assert_eq!(r.manifest_ref(), D);
        assert_eq!(
            r.to_string(),
            format!("127.0.0.1:5000/mods/kubevirt:1.2@{D}")
        );
        let r = Reference::parse("ghcr.io/acme/m:latest").unwrap();
        assert_eq!((r.tag.as_deref(), r.digest), (Some("latest"), None));
        let r = Reference::parse(&format!("docker.io/acme/m@{D}")).unwrap();
        assert_eq!(
            (r.tag.as_deref(), r.api_host()),
            (None, "registry-1.docker.io")
        );
    }

    #[test]
    fn malformed_references_say_what_is_wrong() {
        for (text, why) in [
            ("kubevirt:1", "no registry"),
            ("r.io/m", "neither a tag nor a digest"),
            ("r.io/m@sha256:abc", "the digest"),
            ("r.io/Mods:1", "the repository"),
            ("r.io/m:-x", "the tag"),
            ("r\"x/m:1", "the registry"),
        ] {
            let error = Reference::parse(text).unwrap_err();
            assert!(error.why.contains(why), "{text}: {error}");
            assert_eq!(
                error.to_string(),
                format!(
                    "{text:?} is not an OCI reference (registry/repository:tag@sha256:…): {}",
                    error.why
                )
            );
        }
    }
}
