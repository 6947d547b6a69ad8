//! Kubernetes label selectors in their string form (`app=web,tier in (db,cache),!legacy`): parse them
//! with errors that say where, and match them against a set of labels, the way `k8s.io/apimachinery`'s
//! `labels.Parse` does.

use std::fmt;

/// A parsed label selector: the AND of its requirements. The empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

/// One requirement on one label key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// The test applied to the key's value.
    pub op: Operator,
}

/// The test a requirement applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operator {
    /// `key=value` or `key==value`.
    Equals(String),
    /// `key!=value` (also true when the key is absent).
    NotEquals(String),
    /// `key in (a,b)`.
    In(Vec<String>),
    /// `key notin (a,b)` (also true when the key is absent).
    NotIn(Vec<String>),
    /// `key`.
    Exists,
    /// `!key`.
    DoesNotExist,
    /// `key>n` (the value parses as an integer greater than n).
    GreaterThan(i64),
    /// `key<n`.
    LessThan(i64),
}

/// Why a selector string does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset in the input where the problem was found.
    pub position: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at byte {})", self.message, self.position)
    }
}

impl std::error::Error for ParseError {}

/// The longest selector [`LabelSelector::parse`] accepts, in bytes: parsing and matching stay cheap
/// whoever wrote the selector.
pub const MAX_LENGTH: usize = 8 << 10;

/// The most requirements a selector may have.
pub const MAX_REQUIREMENTS: usize = 100;

impl LabelSelector {
    /// Parses the string form. Whitespace around tokens is ignored. A selector longer than
    /// [`MAX_LENGTH`] bytes or with more than [`MAX_REQUIREMENTS`] requirements is refused.
    pub fn parse(input: &str) -> Result<LabelSelector, ParseError> {
        if input.len() > MAX_LENGTH {
            return Err(err(
                MAX_LENGTH,
                format!(
                    "the selector is {} bytes long, more than the {MAX_LENGTH} allowed",
                    input.len()
                ),
            ));
        }
        let tokens = lex(input)?;
        let mut parser = Parser {
            tokens,
            at: 0,
            end: input.len(),
        };
        let mut requirements = Vec::new();
        if parser.peek().is_none() {
            return Ok(LabelSelector { requirements });
        }
        loop {
            if requirements.len() == MAX_REQUIREMENTS {
                let at = parser.peek().map_or(input.len(), |(pos, _)| *pos);
                return Err(err(
                    at,
                    format!(
                        "the selector has more than the {MAX_REQUIREMENTS} requirements allowed"
                    ),
                ));
            }
            requirements.push(parser.requirement()?);
            match parser.next() {
                None => break,
                Some((_, Token::Comma)) => continue,
                Some((pos, t)) => return Err(err(pos, format!("expected ',' but found {t}"))),
            }
        }
        Ok(LabelSelector { requirements })
    }

    /// The requirements, in the order written.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether the selector matches nothing-in-particular (the empty selector).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether labels given as a lookup function satisfy every requirement.
    pub fn matches_with<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements.iter().all(|r| r.matches(label(&r.key)))
    }

    /// Whether a list of `(key, value)` labels satisfies every requirement.
    pub fn matches<K: AsRef<str>, V: AsRef<str>>(&self, labels: &[(K, V)]) -> bool {
        self.matches_with(|key| {
            labels
                .iter()
                .find(|(k, _)| k.as_ref() == key)
                .map(|(_, v)| v.as_ref())
        })
    }
}

impl Requirement {
    /// Whether a label value (`None` when the key is absent) satisfies this requirement.
    pub fn matches(&self, value: Option<&str>) -> bool {
        match (&self.op, value) {
            (Operator::Equals(want), Some(v)) => v == want,
            (Operator::Equals(_), None) => false,
            (Operator::NotEquals(want), Some(v)) => v != want,
            (Operator::NotEquals(_), None) => true,
            (Operator::In(set), Some(v)) => set.iter().any(|s| s == v),
            (Operator::In(_), None) => false,
            (Operator::NotIn(set), Some(v)) => !set.iter().any(|s| s == v),
            (Operator::NotIn(_), None) => true,
            (Operator::Exists, v) => v.is_some(),
            (Operator::DoesNotExist, v) => v.is_none(),
            (Operator::GreaterThan(n), Some(v)) => v.parse::<i64>().is_ok_and(|x| x > *n),
            (Operator::LessThan(n), Some(v)) => v.parse::<i64>().is_ok_and(|x| x < *n),
            (Operator::GreaterThan(_) | Operator::LessThan(_), None) => false,
        }
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let k = &r.key;
            match &r.op {
                Operator::Equals(v) => write!(f, "{k}={v}")?,
                Operator::NotEquals(v) => write!(f, "{k}!={v}")?,
                Operator::In(s) => write!(f, "{k} in ({})", s.join(","))?,
                Operator::NotIn(s) => write!(f, "{k} notin ({})", s.join(","))?,
                Operator::Exists => write!(f, "{k}")?,
                Operator::DoesNotExist => write!(f, "!{k}")?,
                Operator::GreaterThan(n) => write!(f, "{k}>{n}")?,
                Operator::LessThan(n) => write!(f, "{k}<{n}")?,
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Ident(String),
    Comma,
    Equals,
    DoubleEquals,
    NotEquals,
    Bang,
    Open,
    Close,
    Greater,
    Less,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Ident(s) => write!(f, "'{s}'"),
            Token::Comma => f.write_str("','"),
            Token::Equals => f.write_str("'='"),
            Token::DoubleEquals => f.write_str("'=='"),
            Token::NotEquals => f.write_str("'!='"),
            Token::Bang => f.write_str("'!'"),
            Token::Open => f.write_str("'('"),
            Token::Close => f.write_str("')'"),
            Token::Greater => f.write_str("'>'"),
            Token::Less => f.write_str("'<'"),
        }
    }
}

fn err(position: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        position,
        message: message.into(),
    }
}

fn lex(input: &str) -> Result<Vec<(usize, Token)>, ParseError> {
    let bytes = input.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        let token = match c {
            b' ' | b'\t' | b'\n' | b'\r' => {
                i += 1;
                continue;
            }
            b',' => Token::Comma,
            b'(' => Token::Open,
            b')' => Token::Close,
            b'>' => Token::Greater,
            b'<' => Token::Less,
            b'=' if bytes.get(i + 1) == Some(&b'=') => {
                i += 1;
                Token::DoubleEquals
            }
            b'=' => Token::Equals,
            b'!' if bytes.get(i + 1) == Some(&b'=') => {
                i += 1;
                Token::NotEquals
            }
            b'!' => Token::Bang,
            _ => {
                while i < bytes.len() && !b" \t\n\r,()<>=!".contains(&bytes[i]) {
                    i += 1;
                }
                tokens.push((start, Token::Ident(input[start..i].to_string())));
                continue;
            }
        };
        i += 1;
        tokens.push((start, token));
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<(usize, Token)>,
    at: usize,
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&(usize, Token)> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<(usize, Token)> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn expect_next(&mut self, what: &str) -> Result<(usize, Token), ParseError> {
        let end = self.end;
        self.next()
            .ok_or_else(|| err(end, format!("expected {what} but the selector ended")))
    }

    fn requirement(&mut self) -> Result<Requirement, ParseError> {
        let (pos, first) = self.expect_next("a label key")?;
        if first == Token::Bang {
            let (pos, key) = self.expect_next("a label key after '!'")?;
            let key = self.key(pos, key)?;
            return Ok(Requirement {
                key,
                op: Operator::DoesNotExist,
            });
        }
        let key = self.key(pos, first)?;
        let op = match self.peek() {
            None | Some((_, Token::Comma)) => {
                return Ok(Requirement {
                    key,
                    op: Operator::Exists,
                })
            }
            Some(_) => self.expect_next("an operator")?,
        };
        let op = match op {
            (_, Token::Equals | Token::DoubleEquals) => Operator::Equals(self.value()?),
            (_, Token::NotEquals) => Operator::NotEquals(self.value()?),
            (_, Token::Greater) => Operator::GreaterThan(self.integer()?),
            (_, Token::Less) => Operator::LessThan(self.integer()?),
            (_, Token::Ident(word)) if word == "in" => Operator::In(self.set()?),
            (_, Token::Ident(word)) if word == "notin" => Operator::NotIn(self.set()?),
            (pos, t) => {
                return Err(err(
                    pos,
                    format!("expected an operator (=, ==, !=, in, notin, >, <) after key '{key}' but found {t}"),
                ))
            }
        };
        Ok(Requirement { key, op })
    }

    fn key(&self, pos: usize, token: Token) -> Result<String, ParseError> {
        match token {
            Token::Ident(key) => {
                validate_key(&key)
                    .map_err(|m| err(pos, format!("invalid label key '{key}': {m}")))?;
                Ok(key)
            }
            t => Err(err(pos, format!("expected a label key but found {t}"))),
        }
    }

    fn value(&mut self) -> Result<String, ParseError> {
        match self.peek() {
            // `key=` selects the empty value.
            None | Some((_, Token::Comma)) => Ok(String::new()),
            Some((pos, Token::Ident(v))) => {
                let (pos, v) = (*pos, v.clone());
                self.at += 1;
                validate_value(&v)
                    .map_err(|m| err(pos, format!("invalid label value '{v}': {m}")))?;
                Ok(v)
            }
            Some((pos, t)) => Err(err(*pos, format!("expected a label value but found {t}"))),
        }
    }

    fn integer(&mut self) -> Result<i64, ParseError> {
        match self.expect_next("an integer")? {
            (pos, Token::Ident(v)) => v
                .parse::<i64>()
                .map_err(|_| err(pos, format!("expected an integer but found '{v}'"))),
            (pos, t) => Err(err(pos, format!("expected an integer but found {t}"))),
        }
    }

    fn set(&mut self) -> Result<Vec<String>, ParseError> {
        match self.expect_next("'('")? {
            (_, Token::Open) => {}
            (pos, t) => return Err(err(pos, format!("expected '(' but found {t}"))),
        }
        let mut values = Vec::new();
        loop {
            match self.expect_next("a value or ')'")? {
                (_, Token::Close) => break,
                (pos, Token::Ident(v)) => {
                    validate_value(&v)
                        .map_err(|m| err(pos, format!("invalid label value '{v}': {m}")))?;
                    values.push(v);
                    match self.expect_next("',' or ')'")? {
                        // `in (a,)` selects the empty value too, as apimachinery does.
                        (_, Token::Comma) if matches!(self.peek(), Some((_, Token::Close))) => {
                            values.push(String::new());
                        }
                        (_, Token::Comma) => continue,
                        (_, Token::Close) => break,
                        (pos, t) => {
                            return Err(err(pos, format!("expected ',' or ')' but found {t}")))
                        }
                    }
                }
                // `in (a,,b)` and `in ()` select the empty value, as apimachinery does.
                (_, Token::Comma) => values.push(String::new()),
                (pos, t) => return Err(err(pos, format!("expected a value but found {t}"))),
            }
        }
        if values.is_empty() {
            values.push(String::new());
        }
        // A set, as apimachinery keeps it: each value once (in the order first written), so that
        // what a selector prints reads back as the same selector.
        let mut seen = std::collections::BTreeSet::new();
        values.retain(|v| seen.insert(v.clone()));
        Ok(values)
    }
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63 characters.
fn validate_key(key: &str) -> Result<(), String> {
    let name = match key.split_once('/') {
        Some((prefix, name)) => {
            if prefix.is_empty() || prefix.len() > 253 {
                return Err("the prefix must be a DNS subdomain of 1 to 253 characters".into());
            }
            let ok = prefix.split('.').all(|label| {
                !label.is_empty()
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            });
            if !ok {
                return Err("the prefix must be a lower-case DNS subdomain".into());
            }
            name
        }
        None => key,
    };
    if name.is_empty() {
        return Err("the name part must not be empty".into());
    }
    validate_name(name)
}

/// A label value: empty, or at most 63 alphanumerics, `-`, `_`, `.`, alphanumeric at both ends.
fn validate_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    validate_name(value)
}

fn validate_name(name: &str) -> Result<(), String> {
    if name.len() > 63 {
        return Err("must be at most 63 characters".into());
    }
    let b = name.as_bytes();
    let alnum = |c: &u8| c.is_ascii_alphanumeric();
    if !alnum(&b[0]) || !alnum(&b[b.len() - 1]) {
        return Err("must start and end with a letter or digit".into());
    }
    if !b
        .iter()
        .all(|c| alnum(c) || matches!(c, b'-' | b'_' | b'.'))
    {
        return Err("may contain only letters, digits, '-', '_' and '.'".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(s: &str) -> LabelSelector {
        LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn empty_selector_matches_everything() {
        assert!(sel("").matches::<&str, &str>(&[]));
        assert!(sel("  ").matches(&[("a", "b")]));
    }

    #[test]
    fn equality_and_inequality() {
        assert!(sel("app=web").matches(&[("app", "web")]));
        assert!(sel("app==web").matches(&[("app", "web")]));
        assert!(!sel("app=web").matches(&[("app", "db")]));
        assert!(!sel("app=web").matches::<&str, &str>(&[]));
        assert!(sel("app!=web").matches::<&str, &str>(&[]));
        assert!(!sel("app!=web").matches(&[("app", "web")]));
    }

    #[test]
    fn set_based_requirements() {
        let s = sel("kubevirt.io in (virt-launcher, hotplug-disk)");
        assert!(s.matches(&[("kubevirt.io", "virt-launcher")]));
        assert!(s.matches(&[("kubevirt.io", "hotplug-disk")]));
        assert!(!s.matches::<&str, &str>(&[]));
        assert!(!s.matches(&[("kubevirt.io", "other")]));
        let n = sel("tier notin (db)");
        assert!(n.matches::<&str, &str>(&[]));
        assert!(!n.matches(&[("tier", "db")]));
    }

    #[test]
    fn existence_and_comparisons() {
        assert!(sel("velero.io/plugin-config").matches(&[("velero.io/plugin-config", "")]));
        // Empty values in sets, as apimachinery reads them, and printed so that they read back.
        for (text, values) in [
            ("a in (x,)", vec!["x", ""]),
            ("a in (,x)", vec!["", "x"]),
            ("a in (x,,y)", vec!["x", "", "y"]),
            ("a in ()", vec![""]),
            ("a in (x,x,,,y,)", vec!["x", "", "y"]),
        ] {
            let s = sel(text);
            let Operator::In(got) = &s.requirements[0].op else {
                panic!("{text}: {s:?}");
            };
            assert_eq!(got, &values, "{text}");
            assert_eq!(sel(&s.to_string()), s, "{text} prints as {s}");
        }
        assert!(sel("a in (x,)").matches(&[("a", "")]));
        assert!(sel("!legacy").matches(&[("other", "x")]));
        assert!(!sel("!legacy").matches(&[("legacy", "")]));
        assert!(sel("gen>3").matches(&[("gen", "4")]));
        assert!(!sel("gen<3").matches(&[("gen", "x")]));
    }

    #[test]
    fn conjunction_of_requirements() {
        let s = sel("a=1,b in (2,3),!c");
        assert!(s.matches(&[("a", "1"), ("b", "3")]));
        assert!(!s.matches(&[("a", "1"), ("b", "3"), ("c", "")]));
        assert_eq!(s.requirements().len(), 3);
    }

    #[test]
    fn errors_name_the_position() {
        let e = LabelSelector::parse("a=1,=b").unwrap_err();
        assert_eq!(e.position, 4);
        assert!(LabelSelector::parse("a in 1")
            .unwrap_err()
            .message
            .contains("expected '('"));
        assert!(LabelSelector::parse("a in (1")
            .unwrap_err()
            .message
            .contains("ended"));
        assert!(LabelSelector::parse("Bad_/x=1").is_err());
        assert!(LabelSelector::parse("a=-x")
            .unwrap_err()
            .message
            .contains("invalid label value"));
        assert!(LabelSelector::parse("a b")
            .unwrap_err()
            .message
            .contains("expected an operator"));
    }

    #[test]
    fn selectors_are_bounded_in_length_and_requirements() {
        let long = format!("a in ({})", vec!["v"; MAX_LENGTH].join(","));
        let e = LabelSelector::parse(&long).unwrap_err();
        assert!(e.message.contains("more than the 8192 allowed"), "{e}");
        let many = (0..=MAX_REQUIREMENTS)
            .map(|i| format!("k{i}"))
            .collect::<Vec<_>>()
            .join(",");
        let e = LabelSelector::parse(&many).unwrap_err();
        assert!(e.message.contains("more than the 100 requirements"), "{e}");
        let most = (0..MAX_REQUIREMENTS)
            .map(|i| format!("k{i}=v"))
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(sel(&most).requirements().len(), MAX_REQUIREMENTS);
    }

    #[test]
    fn display_round_trips() {
        for s in [
            "a=1",
            "a!=1",
            "a in (x,y)",
            "a notin (x)",
            "a",
            "!a",
            "a>1",
            "a=1,b",
        ] {
            assert_eq!(sel(s).to_string(), s);
        }
    }
}
