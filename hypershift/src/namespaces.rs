//! The namespaces of a Backup's `spec.includedNamespaces`, as HyperShift discovery walks them: names in
//! order; `*` and glob patterns (`clusters-*`) match every namespace they cover, as Velero's own
//! namespace filter does.

/// One entry of `spec.includedNamespaces`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Included {
    /// A namespace, by name.
    Name(String),
    /// A glob (`*`, `?`): every namespace it matches.
    Pattern(String),
}

impl Included {
    /// Classifies an entry.
    pub fn parse(entry: &str) -> Included {
        if entry.contains(['*', '?']) {
            Included::Pattern(entry.to_string())
        } else {
            Included::Name(entry.to_string())
        }
    }

    /// Whether the entry covers `namespace`.
    pub fn covers(&self, namespace: &str) -> bool {
        match self {
            Included::Name(name) => name == namespace,
            Included::Pattern(pattern) => glob(pattern.as_bytes(), namespace.as_bytes()),
        }
    }
}

/// The entries of `spec.includedNamespaces`, in order (empty when absent).
pub fn included(backup: &velero_wasm_sdk::Object) -> Vec<Included> {
    backup
        .array_at("/spec/includedNamespaces")
        .iter()
        .filter_map(|v| v.as_str())
        .map(Included::parse)
        .collect()
}

/// `*` matches any run of characters, `?` one character; everything else matches itself.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                backtrack = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match backtrack {
                Some((bp, bt)) => {
                    p = bp + 1;
                    t = bt + 1;
                    backtrack = Some((bp, bt + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_patterns() {
        assert!(Included::parse("clusters").covers("clusters"));
        assert!(!Included::parse("clusters").covers("clusters-a"));
        assert!(Included::parse("*").covers("anything"));
        assert!(Included::parse("clusters-*").covers("clusters-a"));
        assert!(!Included::parse("clusters-*").covers("clusters"));
        assert!(Included::parse("c?usters").covers("clusters"));
        assert!(Included::parse("*-prod-*").covers("a-prod-b"));
        assert!(!Included::parse("*-prod-*").covers("a-prod"));
    }
}
