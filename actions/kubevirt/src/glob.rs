//! The globs of Velero's resource-policy filters (docs/kubevirt.md#s4-1): the `names` / `excludedNames`
//! of a `namespacedFilterPolicies` entry and its namespace patterns. Velero compiles them with
//! gobwas/glob without separators, so the syntax is: `*` (and `**`) any run of characters, `?` one
//! character, `[abc]` / `[a-z]` one of a set or range, `[!…]` its complement, `{a,b}` one of the
//! alternatives (which may hold globs themselves; an unclosed `{` ends at the end of the pattern),
//! and `\` taking the next character literally. A pattern matches the whole name.

/// A compiled glob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    pattern: String,
    nodes: Vec<Node>,
}

/// Why a pattern is not a glob Velero would accept (its validation refuses such a policy).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid glob {pattern:?}: {why}")]
pub struct GlobError {
    /// The pattern as written.
    pub pattern: String,
    /// What is wrong.
    pub why: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Char(char),
    Any,
    Single,
    /// `[…]`: a range `lo..=hi` or a list of characters, possibly negated.
    Class {
        negated: bool,
        range: Option<(char, char)>,
        chars: Vec<char>,
    },
    /// `{…,…}`: alternatives.
    AnyOf(Vec<Vec<Node>>),
}

impl Glob {
    /// Compiles `pattern`.
    pub fn new(pattern: &str) -> Result<Glob, GlobError> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut at = 0;
        let fail = |why| GlobError {
            pattern: pattern.to_string(),
            why,
        };
        let nodes = sequence(&chars, &mut at, false).map_err(fail)?;
        Ok(Glob {
            pattern: pattern.to_string(),
            nodes,
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    /// Whether the whole of `text` matches.
    pub fn matches(&self, text: &str) -> bool {
        let text: Vec<char> = text.chars().collect();
        matches(&self.nodes, &text)
    }
}

/// Whether `pattern` is one Velero treats as a namespace glob rather than an exact namespace name (it
/// holds `*`, `?` or `[`).
pub fn is_namespace_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?', '['])
}

/// Reads nodes up to the end, or (inside `{…}`) up to the `,` or `}` that ends this alternative.
fn sequence(chars: &[char], at: &mut usize, in_terms: bool) -> Result<Vec<Node>, &'static str> {
    let mut nodes = Vec::new();
    while let Some(&c) = chars.get(*at) {
        match c {
            ',' | '}' if in_terms => break,
            '*' => {
                *at += 1;
                if chars.get(*at) == Some(&'*') {
                    *at += 1;
                }
                nodes.push(Node::Any);
            }
            '?' => {
                *at += 1;
                nodes.push(Node::Single);
            }
            '[' => {
                *at += 1;
                nodes.push(class(chars, at)?);
            }
            '{' => {
                *at += 1;
                let mut alternatives = vec![sequence(chars, at, true)?];
                while chars.get(*at) == Some(&',') {
                    *at += 1;
                    alternatives.push(sequence(chars, at, true)?);
                }
                if chars.get(*at) == Some(&'}') {
                    *at += 1;
                }
                nodes.push(Node::AnyOf(alternatives));
            }
            '\\' => {
                *at += 1;
                // A trailing backslash escapes nothing and is dropped, as gobwas does.
                if let Some(&escaped) = chars.get(*at) {
                    *at += 1;
                    nodes.push(Node::Char(escaped));
                }
            }
            other => {
                *at += 1;
                nodes.push(Node::Char(other));
            }
        }
    }
    Ok(nodes)
}

/// Reads a class after its `[`: `!` first negates; `lo-hi` is a range; otherwise characters (with
/// `\` escapes) up to `]`.
fn class(chars: &[char], at: &mut usize) -> Result<Node, &'static str> {
    let negated = chars.get(*at) == Some(&'!');
    if negated {
        *at += 1;
    }
    if let (Some(&lo), Some('-'), Some(&hi)) =
        (chars.get(*at), chars.get(*at + 1), chars.get(*at + 2))
    {
        *at += 3;
        if chars.get(*at) != Some(&']') {
            return Err("a range [lo-hi] must close right after hi");
        }
        *at += 1;
        if hi < lo {
            return Err("a range's upper bound is below its lower bound");
        }
        return Ok(Node::Class {
            negated,
            range: Some((lo, hi)),
            chars: Vec::new(),
        });
    }
    let mut set = Vec::new();
    loop {
        match chars.get(*at) {
            None => return Err("a [ is never closed"),
            Some(']') => {
                *at += 1;
                break;
            }
            Some('\\') => {
                *at += 1;
                if let Some(&escaped) = chars.get(*at) {
                    *at += 1;
                    set.push(escaped);
                }
            }
            Some(&c) => {
                *at += 1;
                set.push(c);
            }
        }
    }
    if set.is_empty() {
        return Err("a [] class holds no character");
    }
    Ok(Node::Class {
        negated,
        range: None,
        chars: set,
    })
}

fn matches(nodes: &[Node], text: &[char]) -> bool {
    let Some((first, rest)) = nodes.split_first() else {
        return text.is_empty();
    };
    match first {
        Node::Char(c) => text.first() == Some(c) && matches(rest, &text[1..]),
        Node::Single => !text.is_empty() && matches(rest, &text[1..]),
        Node::Class {
            negated,
            range,
            chars,
        } => match text.first() {
            None => false,
            Some(c) => {
                let inside = match range {
                    Some((lo, hi)) => (lo..=hi).contains(&c),
                    None => chars.contains(c),
                };
                inside != *negated && matches(rest, &text[1..])
            }
        },
        Node::Any => (0..=text.len()).any(|skip| matches(rest, &text[skip..])),
        Node::AnyOf(alternatives) => alternatives.iter().any(|alternative| {
            let mut joined = alternative.clone();
            joined.extend_from_slice(rest);
            matches(&joined, text)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, text: &str) -> bool {
        Glob::new(pattern).unwrap().matches(text)
    }

    #[test]
    fn literals_match_whole_names_only() {
        assert!(m("web-01", "web-01"));
        assert!(!m("web-01", "web-011"));
        assert!(!m("web", "web-01"));
    }

    #[test]
    fn stars_and_question_marks() {
        assert!(m("*", ""));
        assert!(m("web-*", "web-"));
        assert!(m("web-*", "web-01"));
        assert!(m("*-disk-*", "fedora-disk-root"));
        assert!(m("**", "any.thing/at-all"));
        assert!(m("vm-??", "vm-01"));
        assert!(!m("vm-??", "vm-1"));
        assert!(!m("web-*", "db-01"));
    }

    #[test]
    fn classes_ranges_and_their_complements() {
        assert!(m("vm-[0-9]", "vm-7"));
        assert!(!m("vm-[0-9]", "vm-a"));
        assert!(m("vm-[!0-9]", "vm-a"));
        assert!(m("[abc]x", "bx"));
        assert!(!m("[!abc]x", "bx"));
        assert!(m("[-]", "-"));
    }

    #[test]
    fn alternatives_hold_globs_and_may_stay_open() {
        assert!(m("{web,db}-*", "db-01"));
        assert!(!m("{web,db}-*", "cache-01"));
        assert!(m("vm-{a*,b?}", "vm-alpha"));
        assert!(m("vm-{a*,b?}", "vm-b1"));
        assert!(!m("vm-{a*,b?}", "vm-b12"));
        assert!(m("x{a,b", "xb"));
        assert!(m("x{a,}", "x"));
        // Outside braces, `}` and `,` are plain characters.
        assert!(m("a,b}", "a,b}"));
    }

    #[test]
    fn a_backslash_takes_the_next_character_literally() {
        assert!(m(r"a\*", "a*"));
        assert!(!m(r"a\*", "ab"));
        assert!(m(r"[\]]", "]"));
        assert!(m("a\\", "a"));
    }

    #[test]
    fn patterns_velero_refuses_are_errors() {
        for bad in ["vm-[0-9", "[]", "[z-a]", "[a-bc]"] {
            let e = Glob::new(bad).unwrap_err();
            assert_eq!(e.pattern, bad);
        }
    }

    #[test]
    fn namespace_globs_are_told_from_exact_names() {
        assert!(is_namespace_glob("team-*"));
        assert!(is_namespace_glob("ns-?"));
        assert!(is_namespace_glob("ns-[ab]"));
        assert!(!is_namespace_glob("vm-workloads"));
        assert!(!is_namespace_glob("{a,b}"));
    }
}
