//! Where each case of a suite file is written, found by parsing the file (libyaml's events, read the
//! way serde_norway reads the suite), never by searching its text: a `- name:` or `expect:` inside
//! another case's block scalar is that scalar's text, not a case. `test` names a case's line in its
//! errors; `--update` replaces the bytes of one case's `expect:` and leaves every other byte as written.

use std::ops::Range;

use crate::yaml_events::{Event, Events, Kind, SyntaxError};

/// One case (the n-th item of `cases`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CaseLayout {
    /// The 1-based line where the case begins.
    pub(crate) line: u64,
    /// Where `--update` may write; None when the case is not written as `key: value` lines (a flow
    /// mapping `{...}` or an alias), which `--update` leaves to be changed by hand.
    pub(crate) block: Option<Block>,
}

/// A case written as a block mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Block {
    /// The column of the case's keys (0-based, in characters: spaces and `- ` only precede them).
    pub(crate) indent: usize,
    /// The bytes of `expect: …`, from the key to the last character of its value.
    pub(crate) expect: Option<Range<usize>>,
    /// The byte after the case's last character.
    pub(crate) end: usize,
}

impl Block {
    /// The edit that makes `block` (`key: value` lines) this case's expectation: the bytes to
    /// replace and what replaces them.
    pub(crate) fn edit(&self, text: &str, block: &str) -> (Range<usize>, String) {
        let lines = block
            .lines()
            .map(|line| format!("\n{}{line}", " ".repeat(self.indent + 2)))
            .collect::<String>();
        match &self.expect {
            Some(range) => (range.clone(), format!("expect:{lines}")),
            None => {
                // After the case's last line (a comment ending it stays on it).
                let at = text[self.end..]
                    .find('\n')
                    .map_or(text.len(), |n| self.end + n);
                (
                    at..at,
                    format!("\n{}expect:{lines}", " ".repeat(self.indent)),
                )
            }
        }
    }
}

/// The layout of every case of a suite, in order. A file that is not a mapping with a `cases`
/// sequence has none (the suite's parse says what is wrong with it).
pub(super) fn cases(text: &str) -> Result<Vec<CaseLayout>, SyntaxError> {
    let mut events = Events::new(text);
    let mut next = || events.next().transpose();
    let mut found = Vec::new();
    // The stream, the document, the root.
    let (Some(_), Some(_), Some(root)) = (next()?, next()?, next()?) else {
        return Ok(found);
    };
    if !matches!(root.kind, Kind::MappingStart { .. }) {
        return Ok(found);
    }
    loop {
        let Some(key) = next()? else {
            return Ok(found);
        };
        if key.kind == Kind::MappingEnd {
            return Ok(found);
        }
        let is_cases = key.kind == Kind::Scalar("cases".into());
        node_end(text, &mut next, key)?;
        let Some(value) = next()? else {
            return Ok(found);
        };
        if !(is_cases && matches!(value.kind, Kind::SequenceStart { .. })) {
            node_end(text, &mut next, value)?;
            continue;
        }
        loop {
            let Some(item) = next()? else {
                return Ok(found);
            };
            if item.kind == Kind::SequenceEnd {
                return Ok(found);
            }
            let line = item.start.line;
            let block = match item.kind {
                Kind::MappingStart { flow: false } => Some(block_case(text, &mut next)?),
                _ => {
                    node_end(text, &mut next, item)?;
                    None
                }
            };
            found.push(CaseLayout { line, block });
        }
    }
}

/// The next event, if any.
type Next<'a> = dyn FnMut() -> Result<Option<Event>, SyntaxError> + 'a;

/// Reads a block mapping's pairs, its start already read.
fn block_case(text: &str, next: &mut Next<'_>) -> Result<Block, SyntaxError> {
    let mut block = Block {
        indent: 0,
        expect: None,
        end: 0,
    };
    let mut first = true;
    while let Some(key) = next()? {
        if key.kind == Kind::MappingEnd {
            break;
        }
        if first {
            block.indent = key.start.column.saturating_sub(1) as usize;
            first = false;
        }
        let start = key.start.offset;
        let is_expect = key.kind == Kind::Scalar("expect".into());
        let key_end = node_end(text, next, key)?;
        let Some(value) = next()? else { break };
        let end = node_end(text, next, value)?.max(key_end);
        if is_expect {
            block.expect = Some(start..end);
        }
        block.end = block.end.max(end);
    }
    Ok(block)
}

/// Reads a whole node whose first event is `first`; returns the byte after its last character.
/// Events that span no text (an empty value, where a block collection starts or ends) are not
/// characters; a block scalar's trailing line breaks are not either.
fn node_end(text: &str, next: &mut Next<'_>, first: Event) -> Result<usize, SyntaxError> {
    let mut end = 0;
    let mut depth = 0usize;
    let mut event = first;
    loop {
        if event.end.offset > event.start.offset {
            end = end.max(event.end.offset);
        }
        match event.kind {
            Kind::SequenceStart { .. } | Kind::MappingStart { .. } => depth += 1,
            Kind::SequenceEnd | Kind::MappingEnd => depth = depth.saturating_sub(1),
            Kind::StreamEnd => break,
            _ => {}
        }
        if depth == 0 {
            break;
        }
        match next()? {
            Some(e) => event = e,
            None => break,
        }
    }
    let content = text.get(..end).unwrap_or(text);
    Ok(content.trim_end_matches([' ', '\t', '\r', '\n']).len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_are_found_by_parsing_not_by_their_text() {
        let text = "\
cases:
  - name: a
    settings:
      note: |
        - name: b
          expect:
            skipRestore: true
    expect: {skipRestore: false}   # kept
  - {name: flow}
  - action: x
    name: b
    backup: b.json  # last
";
        let found = cases(text).unwrap();
        assert_eq!(found.len(), 3);
        assert_eq!(found.iter().map(|c| c.line).collect::<Vec<_>>(), [2, 9, 10]);
        let a = found[0].block.as_ref().unwrap();
        assert_eq!(a.indent, 4);
        assert_eq!(
            &text[a.expect.clone().unwrap()],
            "expect: {skipRestore: false}"
        );
        assert!(found[1].block.is_none(), "a flow case is left alone");
        let b = found[2].block.as_ref().unwrap();
        assert_eq!((b.indent, b.expect.clone()), (4, None));
        assert!(text[..b.end].ends_with("backup: b.json"));
        let (at, new) = b.edit(text, "skipRestore: true\n");
        assert_eq!(text[at.start..].chars().next(), Some('\n'));
        assert_eq!(new, "\n    expect:\n      skipRestore: true");
    }
}
