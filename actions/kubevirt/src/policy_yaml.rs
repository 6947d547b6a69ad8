//! A reader for the YAML of Velero's resource policy documents (docs/kubevirt.md#s4-1), into a
//! [`serde_json::Value`] that [`crate::resource_policy`] deserializes.
//!
//! Written for this component rather than taken from a full YAML library: the one it used
//! (serde_norway over libyaml) was a fifth of the component, and the packed module ConfigMap passed the
//! 262,144 bytes a client-side `kubectl apply` allows (docs/install.md#s3). Policies are written by hand
//! from Velero's examples, in a small part of YAML, which this reads: block mappings and sequences
//! (also a sequence at its key's indentation, and `- key: value` items), flow sequences and mappings
//! (which may span lines), plain, single- and double-quoted scalars, block scalars (`|`, `>`, with
//! chomping and indentation indicators), comments, and one document with an optional `---`. Every
//! scalar is a string (empty, `~` and `null` are null), as the fields read here are strings.
//! Anything else (anchors, aliases, tags, directives, complex keys, quoted scalars over several
//! lines, tabs in indentation, a second document, a key given twice) is an error naming its line and
//! column, never a guess.

use serde_json::{Map, Value};

/// Why a policy document is not read: where, and what is wrong or not supported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line} column {column}: {what}")]
pub struct YamlError {
    /// 1-based line of the document.
    pub line: usize,
    /// 1-based column (in characters) on that line.
    pub column: usize,
    /// What is wrong.
    pub what: String,
}

/// Reads one YAML document into a JSON value (an empty document is `null`).
pub fn parse(text: &str) -> Result<Value, YamlError> {
    let mut reader = Reader::new(text)?;
    let value = reader.block_node(0, None)?;
    if let Some(line) = reader.lines.get(reader.next_content(reader.at)) {
        return Err(line.error(
            line.indent,
            "more content than one YAML node (check its indentation)",
        ));
    }
    Ok(value)
}

/// One line of the document: its indentation and its content without the comment.
#[derive(Debug, Clone, Copy)]
struct Line<'a> {
    /// 1-based line number.
    number: usize,
    /// The line as written (block scalars keep it, comments included).
    raw: &'a str,
    /// Leading spaces; for a virtual line (the content after `- `), the column where it starts.
    indent: usize,
    /// What follows the indentation, comment and trailing spaces removed.
    content: &'a str,
}

impl Line<'_> {
    fn is_blank(&self) -> bool {
        self.content.is_empty()
    }

    fn error(&self, column: usize, what: impl Into<String>) -> YamlError {
        YamlError {
            line: self.number,
            column: column + 1,
            what: what.into(),
        }
    }
}

struct Reader<'a> {
    lines: Vec<Line<'a>>,
    /// The next line to read.
    at: usize,
    /// Collections open around the node being read.
    depth: usize,
}

/// The most collections one may nest (serde_norway, which the component used before, allowed 128):
/// deeper is refused rather than exhausting the guest's stack.
const MAX_DEPTH: usize = 64;

/// The error for a document nested deeper than [`MAX_DEPTH`].
fn too_deep() -> String {
    format!("collections nested deeper than {MAX_DEPTH} levels")
}

impl<'a> Reader<'a> {
    fn new(text: &'a str) -> Result<Self, YamlError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut lines = Vec::new();
        let mut started = false;
        let mut ended = false;
        for (i, raw) in text.lines().enumerate() {
            let indent = raw.len() - raw.trim_start_matches(' ').len();
            let content = strip_comment(&raw[indent..]).trim_end();
            let mut line = Line {
                number: i + 1,
                raw,
                indent,
                content,
            };
            if indent == 0 && (content == "---" || content.starts_with("--- ")) {
                if started || ended {
                    return Err(line.error(0, "a second YAML document: a policy is one document"));
                }
                started = true;
                line.content = content[3..].trim_start();
                line.indent = raw.len() - raw[3..].trim_start().len();
            } else if indent == 0 && content == "..." {
                ended = true;
                continue;
            } else if indent == 0 && content.starts_with('%') {
                return Err(line.error(0, "YAML directives are not supported"));
            } else if !content.is_empty() && ended {
                return Err(line.error(0, "content after the end of the document (`...`)"));
            }
            if raw[indent..].starts_with('\t') && !content.is_empty() {
                return Err(line.error(indent, "a tab in indentation (YAML indents with spaces)"));
            }
            started |= !content.is_empty();
            lines.push(line);
        }
        Ok(Reader {
            lines,
            at: 0,
            depth: 0,
        })
    }

    /// The index of the first non-blank line from `from` (or the number of lines).
    fn next_content(&self, from: usize) -> usize {
        (from..self.lines.len())
            .find(|&i| !self.lines[i].is_blank())
            .unwrap_or(self.lines.len())
    }

    /// A node in block context at indentation `min` or more; `key_indent`: the indentation of the key
    /// whose value it is, where a sequence may also sit (`key:` then `- item` below it).
    fn block_node(&mut self, min: usize, key_indent: Option<usize>) -> Result<Value, YamlError> {
        let i = self.next_content(self.at);
        let Some(line) = self.lines.get(i).copied() else {
            self.at = i;
            return Ok(Value::Null);
        };
        let is_item = is_sequence_item(line.content);
        if line.indent < min && !(is_item && Some(line.indent) == key_indent) {
            return Ok(Value::Null);
        }
        self.at = i;
        if is_item || mapping_colon(line.content).is_some() {
            if self.depth == MAX_DEPTH {
                return Err(line.error(line.indent, too_deep()));
            }
            self.depth += 1;
            let collection = if is_item {
                self.sequence(line.indent)
            } else {
                self.mapping(line.indent)
            };
            self.depth -= 1;
            collection
        } else {
            self.at = i + 1;
            self.scalar_or_flow(line, line.indent, line.content, min)
        }
    }

    fn sequence(&mut self, indent: usize) -> Result<Value, YamlError> {
        let mut items = Vec::new();
        loop {
            let i = self.next_content(self.at);
            let Some(line) = self.lines.get(i).copied() else {
                break;
            };
            if line.indent != indent || !is_sequence_item(line.content) {
                if line.indent > indent {
                    return Err(line.error(line.indent, "unexpected indentation in a sequence"));
                }
                break;
            }
            let rest = line.content[1..].trim_start();
            if rest.is_empty() {
                self.at = i + 1;
                items.push(self.block_node(indent + 1, None)?);
            } else {
                // The item's content as a line of its own, at the column it starts.
                let column = line.indent + (line.content.len() - rest.len());
                self.lines[i].indent = column;
                self.lines[i].content = rest;
                if is_sequence_item(rest) || mapping_colon(rest).is_some() {
                    self.at = i;
                    items.push(self.block_node(column, None)?);
                } else {
                    // A scalar continues on lines indented more than the sequence.
                    self.at = i + 1;
                    items.push(self.scalar_or_flow(self.lines[i], column, rest, indent + 1)?);
                }
            }
        }
        Ok(Value::Array(items))
    }

    fn mapping(&mut self, indent: usize) -> Result<Value, YamlError> {
        let mut map = Map::new();
        loop {
            let i = self.next_content(self.at);
            let Some(line) = self.lines.get(i).copied() else {
                break;
            };
            if line.indent < indent {
                break;
            }
            if line.indent > indent {
                return Err(line.error(line.indent, "unexpected indentation in a mapping"));
            }
            if is_sequence_item(line.content) {
                break;
            }
            if line.content == "?" || line.content.starts_with("? ") {
                return Err(line.error(line.indent, "complex mapping keys (`?`) are not supported"));
            }
            let Some(colon) = mapping_colon(line.content) else {
                return Err(line.error(line.indent, "expected `key: value` in a mapping"));
            };
            let key = scalar_key(&line, &line.content[..colon])?;
            if map.contains_key(&key) {
                return Err(line.error(line.indent, format!("the key {key:?} is given twice")));
            }
            let rest = line.content[colon + 1..].trim_start();
            let column = line.indent + (line.content.len() - rest.len());
            self.at = i + 1;
            let value = if rest.is_empty() {
                self.block_node(indent + 1, Some(indent))?
            } else {
                self.scalar_or_flow(line, column, rest, indent + 1)?
            };
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }

    /// The value written at `column` of `line` (`text`): a block scalar, a flow collection, a quoted
    /// or a plain scalar; continuation lines are those indented at least `min`.
    fn scalar_or_flow(
        &mut self,
        line: Line<'a>,
        column: usize,
        text: &str,
        min: usize,
    ) -> Result<Value, YamlError> {
        match text.as_bytes()[0] {
            b'|' | b'>' => self.block_scalar(line, column, text, min.saturating_sub(1)),
            b'[' | b'{' => {
                let mut joined = text.to_string();
                let mut end = FlowEnd::new();
                end.feed(text);
                while !end.closed() {
                    let i = self.next_content(self.at);
                    let Some(next) = self.lines.get(i) else {
                        return Err(line.error(column, "a flow collection is not closed"));
                    };
                    joined.push(' ');
                    joined.push_str(next.content);
                    end.feed(" ");
                    end.feed(next.content);
                    self.at = i + 1;
                }
                let mut flow = Flow {
                    text: &joined,
                    at: 0,
                    depth: self.depth,
                };
                let value = flow.node().map_err(|what| line.error(column, what))?;
                flow.skip_spaces();
                if flow.at < joined.len() {
                    return Err(line.error(column, "content after a flow collection"));
                }
                Ok(value)
            }
            b'"' | b'\'' => {
                let (value, used) = quoted(text).map_err(|what| line.error(column, what))?;
                if !text[used..].trim().is_empty() {
                    return Err(line.error(column, "content after a quoted scalar"));
                }
                Ok(Value::String(value))
            }
            _ => {
                let mut joined = plain(text).map_err(|what| line.error(column, what))?;
                loop {
                    let i = self.next_content(self.at);
                    match self.lines.get(i) {
                        Some(next) if next.indent >= min && next.indent > 0 => {
                            let more = plain(next.content)
                                .map_err(|what| next.error(next.indent, what))?;
                            joined.push(' ');
                            joined.push_str(&more);
                            self.at = i + 1;
                        }
                        _ => break,
                    }
                }
                Ok(plain_value(joined))
            }
        }
    }

    /// A literal (`|`) or folded (`>`) scalar whose lines are indented more than `parent`.
    fn block_scalar(
        &mut self,
        line: Line<'a>,
        column: usize,
        header: &str,
        parent: usize,
    ) -> Result<Value, YamlError> {
        let literal = header.starts_with('|');
        let mut chomp = b' ';
        let mut explicit = None;
        for c in header[1..].bytes() {
            match c {
                b'-' | b'+' if chomp == b' ' => chomp = c,
                b'1'..=b'9' if explicit.is_none() => explicit = Some(usize::from(c - b'0')),
                _ => {
                    return Err(line.error(
                        column,
                        "a block scalar header is `|` or `>` with `-`, `+` or an indentation digit",
                    ))
                }
            }
        }
        let mut body: Vec<&str> = Vec::new();
        let mut indent = explicit.map(|n| parent + n);
        while let Some(next) = self.lines.get(self.at) {
            let spaces = next.raw.len() - next.raw.trim_start_matches(' ').len();
            let blank = next.raw.trim().is_empty();
            if !blank {
                let want = *indent.get_or_insert(spaces);
                if spaces < want || spaces <= parent {
                    break;
                }
                body.push(&next.raw[want..]);
            } else {
                body.push("");
            }
            self.at += 1;
        }
        let kept = body.iter().rev().take_while(|l| l.is_empty()).count();
        let text_lines = &body[..body.len() - kept];
        let mut text = String::new();
        for (n, l) in text_lines.iter().enumerate() {
            if n > 0 {
                let previous = text_lines[n - 1];
                // Folding: a break between two lines of text is a space; one before empty lines
                // is dropped (each empty line is a break); more-indented lines keep theirs.
                let folds = !literal && !previous.is_empty() && !previous.starts_with(' ');
                if !folds || l.starts_with(' ') {
                    text.push('\n');
                } else if !l.is_empty() {
                    text.push(' ');
                }
            }
            text.push_str(l);
        }
        match chomp {
            b'-' => {}
            b'+' if !text_lines.is_empty() => text.push_str(&"\n".repeat(kept + 1)),
            b'+' => text.push_str(&"\n".repeat(kept)),
            _ if !text_lines.is_empty() => text.push('\n'),
            _ => {}
        }
        // The lines after a block scalar start from the first one it did not take.
        self.at -= kept;
        Ok(Value::String(text))
    }
}

/// `- item` or a lone `-`.
fn is_sequence_item(content: &str) -> bool {
    content == "-" || content.starts_with("- ")
}

/// The byte offset of the `:` that ends a mapping key on this line, if it is one (`key:` at the end
/// or followed by a space, outside quotes and flow collections).
fn mapping_colon(content: &str) -> Option<usize> {
    let bytes = content.as_bytes();
    let mut i = 0;
    if matches!(bytes.first(), Some(b'"' | b'\'')) {
        i = quoted(content).ok()?.1;
    } else if matches!(bytes.first(), Some(b'[' | b'{' | b'|' | b'>')) {
        return None;
    }
    while i < bytes.len() {
        if bytes[i] == b':' && (i + 1 == bytes.len() || bytes[i + 1] == b' ') {
            return Some(i);
        }
        i += 1;
    }
    None
}

fn scalar_key(line: &Line<'_>, key: &str) -> Result<String, YamlError> {
    let key = key.trim_end();
    match key.as_bytes().first() {
        Some(b'"' | b'\'') => Ok(quoted(key).map_err(|what| line.error(line.indent, what))?.0),
        Some(b'?') => Err(line.error(line.indent, "complex mapping keys (`?`) are not supported")),
        Some(b'[' | b'{') => Err(line.error(
            line.indent,
            "a collection as a mapping key is not supported",
        )),
        None => Err(line.error(line.indent, "an empty mapping key")),
        _ => plain(key).map_err(|what| line.error(line.indent, what)),
    }
}

/// A line's content up to its comment: `#` at the start or after a space, outside quotes.
fn strip_comment(text: &str) -> &str {
    let bytes = text.as_bytes();
    let mut quote = None;
    let mut previous = b' ';
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match quote {
            Some(b'\'') if c == b'\'' => {
                if bytes.get(i + 1) == Some(&b'\'') {
                    i += 1;
                } else {
                    quote = None;
                }
            }
            Some(b'"') if c == b'\\' => i += 1,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == b'#' && (previous == b' ' || previous == b'\t') => return &text[..i],
            None if (c == b'"' || c == b'\'') && b" \t:-[{,?".contains(&previous) => {
                quote = Some(c)
            }
            None => {}
        }
        previous = c;
        i += 1;
    }
    text
}

/// A plain scalar's text, refusing what this reader does not support.
fn plain(text: &str) -> Result<String, String> {
    let text = text.trim();
    match text.as_bytes().first() {
        Some(b'&') => return Err("anchors (`&`) are not supported".into()),
        Some(b'*') => return Err("aliases (`*`) are not supported".into()),
        Some(b'!') => return Err("tags (`!`) are not supported".into()),
        Some(b'@' | b'`') => {
            return Err(format!("a plain scalar cannot start with {:?}", &text[..1]))
        }
        Some(b'"' | b'\'') => {
            return Err("a quoted scalar over several lines is not supported".into())
        }
        _ => {}
    }
    if text.contains(": ") || text.ends_with(':') {
        return Err("a `key: value` where a scalar is expected (check the indentation)".into());
    }
    Ok(text.to_string())
}

/// A plain scalar as a value: empty, `~` and `null` (any case YAML allows) are null, all else text.
fn plain_value(text: String) -> Value {
    match text.as_str() {
        "" | "~" | "null" | "Null" | "NULL" => Value::Null,
        _ => Value::String(text),
    }
}

/// A quoted scalar at the start of `text`: its value and the bytes it used.
fn quoted(text: &str) -> Result<(String, usize), String> {
    let quote = text.as_bytes()[0];
    let mut out = String::new();
    let mut chars = text.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        match c {
            '\'' if quote == b'\'' => {
                if text[i + 1..].starts_with('\'') {
                    chars.next();
                    out.push('\'');
                } else {
                    return Ok((out, i + 1));
                }
            }
            '"' if quote == b'"' => return Ok((out, i + 1)),
            '\\' if quote == b'"' => {
                let Some((_, e)) = chars.next() else { break };
                let escaped = match e {
                    '0' => '\0',
                    'a' => '\u{7}',
                    'b' => '\u{8}',
                    't' | '\t' => '\t',
                    'n' => '\n',
                    'v' => '\u{b}',
                    'f' => '\u{c}',
                    'r' => '\r',
                    'e' => '\u{1b}',
                    ' ' => ' ',
                    '"' => '"',
                    '/' => '/',
                    '\\' => '\\',
                    'N' => '\u{85}',
                    '_' => '\u{a0}',
                    'L' => '\u{2028}',
                    'P' => '\u{2029}',
                    'x' | 'u' | 'U' => {
                        let width = match e {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let hex: String = (0..width)
                            .filter_map(|_| chars.next().map(|(_, h)| h))
                            .collect();
                        u32::from_str_radix(&hex, 16)
                            .ok()
                            .filter(|_| hex.len() == width)
                            .and_then(char::from_u32)
                            .ok_or_else(|| {
                                format!("a bad escape \\{e}{hex} in a double-quoted scalar")
                            })?
                    }
                    other => {
                        return Err(format!(
                            "an unknown escape \\{other} in a double-quoted scalar"
                        ))
                    }
                };
                out.push(escaped);
            }
            _ => out.push(c),
        }
    }
    Err("a quoted scalar is not closed on its line (quoted scalars over several lines are not supported)".into())
}

/// Tracks whether every `[` and `{` (outside quotes) of the text fed so far is closed, reading each
/// byte once: a flow collection over many lines is fed line by line, never rescanned from its start
/// (rescanning made a 1 MiB one over 100,000 lines cost the whole 30 s of a VM call).
struct FlowEnd {
    depth: usize,
    quote: Option<u8>,
    previous: u8,
}

impl FlowEnd {
    fn new() -> Self {
        FlowEnd {
            depth: 0,
            quote: None,
            previous: b' ',
        }
    }

    /// Reads `text`, which follows what was fed before.
    fn feed(&mut self, text: &str) {
        #[cfg(test)]
        FLOW_BYTES_SCANNED.with(|c| c.set(c.get() + text.len()));
        for c in text.bytes() {
            match self.quote {
                Some(q) if c == q => self.quote = None,
                Some(_) => {}
                None => match c {
                    b'[' | b'{' => self.depth += 1,
                    b']' | b'}' => self.depth = self.depth.saturating_sub(1),
                    b'"' | b'\'' if b" [{,:".contains(&self.previous) => self.quote = Some(c),
                    _ => {}
                },
            }
            self.previous = c;
        }
    }

    fn closed(&self) -> bool {
        self.depth == 0
    }
}

#[cfg(test)]
thread_local! {
    /// Bytes this thread's checks for a flow collection's end have scanned: tests count work with it.
    pub(crate) static FLOW_BYTES_SCANNED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A flow collection (`[a, b]`, `{k: v}`), read from a string.
struct Flow<'t> {
    text: &'t str,
    at: usize,
    /// Collections open around the node being read (the block ones included).
    depth: usize,
}

impl Flow<'_> {
    fn skip_spaces(&mut self) {
        while self.text[self.at..].starts_with([' ', '\t']) {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn node(&mut self) -> Result<Value, String> {
        self.skip_spaces();
        if matches!(self.peek(), Some(b'[' | b'{')) {
            if self.depth == MAX_DEPTH {
                return Err(too_deep());
            }
            self.depth += 1;
            let collection = self.collection();
            self.depth -= 1;
            return collection;
        }
        self.scalar()
    }

    /// A flow sequence or mapping, at its `[` or `{`.
    fn collection(&mut self) -> Result<Value, String> {
        match self.peek() {
            Some(b'[') => {
                self.at += 1;
                let mut items = Vec::new();
                while self.entry_follows(b']', items.is_empty())? {
                    items.push(self.node()?);
                    self.skip_spaces();
                    if self.peek() == Some(b':') {
                        return Err("a `key: value` inside a flow sequence is not supported".into());
                    }
                }
                Ok(Value::Array(items))
            }
            Some(b'{') => {
                self.at += 1;
                let mut map = Map::new();
                while self.entry_follows(b'}', map.is_empty())? {
                    let key = match self.node()? {
                        Value::String(key) => key,
                        Value::Null => String::new(),
                        _ => return Err("a collection as a mapping key is not supported".into()),
                    };
                    self.skip_spaces();
                    let value = if self.peek() == Some(b':') {
                        self.at += 1;
                        self.node()?
                    } else {
                        Value::Null
                    };
                    if map.insert(key.clone(), value).is_some() {
                        return Err(format!("the key {key:?} is given twice"));
                    }
                }
                Ok(Value::Object(map))
            }
            _ => self.scalar(),
        }
    }

    /// A quoted or plain scalar in a flow collection (a plain one ends at `,`, a bracket or `: `).
    fn scalar(&mut self) -> Result<Value, String> {
        if matches!(self.peek(), Some(b'"' | b'\'')) {
            let (value, used) = quoted(&self.text[self.at..])?;
            self.at += used;
            return Ok(Value::String(value));
        }
        let start = self.at;
        while let Some(c) = self.peek() {
            let ends_key = c == b':'
                && matches!(
                    self.text.as_bytes().get(self.at + 1),
                    None | Some(b' ' | b',' | b']' | b'}')
                );
            if matches!(c, b',' | b'[' | b']' | b'{' | b'}') || ends_key {
                break;
            }
            self.at += 1;
        }
        Ok(plain_value(plain(&self.text[start..self.at])?))
    }

    /// Whether another entry follows (consuming the `,` before it), or the collection closes with
    /// `close` here (consuming it); `first`: nothing read yet.
    fn entry_follows(&mut self, close: u8, first: bool) -> Result<bool, String> {
        self.skip_spaces();
        if !first {
            match self.peek() {
                Some(b',') => {
                    self.at += 1;
                    self.skip_spaces();
                }
                Some(c) if c == close => {}
                None => return Err("a flow collection is not closed".into()),
                Some(_) => {
                    return Err(format!(
                        "expected `,` or `{}` in a flow collection",
                        char::from(close)
                    ))
                }
            }
        }
        match self.peek() {
            Some(c) if c == close => {
                self.at += 1;
                Ok(false)
            }
            None => Err("a flow collection is not closed".into()),
            Some(_) => Ok(true),
        }
    }
}

#[cfg(test)]
mod tests;
