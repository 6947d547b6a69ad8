//! YAML read event by event with libyaml, the parser serde_norway itself uses, so what is found here
//! is what a later `serde_norway::from_str` of the same text reads. Each event carries its byte
//! positions in the text: `velero-wasm test --update` finds a case's `expect:` by them, and a file's
//! nesting and syntax are checked before a full parse. Syntax errors are libyaml's own fixed phrases
//! with their positions: they never quote the text.

use std::ffi::CStr;
use std::fmt;
use std::marker::PhantomData;
use std::mem::MaybeUninit;

use unsafe_libyaml_norway as unsafe_yaml;

/// A place in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark {
    /// Byte offset.
    pub offset: usize,
    /// 1-based line.
    pub line: u64,
    /// 1-based column, in characters.
    pub column: u64,
}

impl Mark {
    fn of(mark: unsafe_yaml::yaml_mark_t) -> Mark {
        Mark {
            offset: mark.index as usize,
            line: mark.line + 1,
            column: mark.column + 1,
        }
    }
}

impl fmt::Display for Mark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {} column {}", self.line, self.column)
    }
}

/// What an event is. Only what its users need is kept of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    StreamStart,
    StreamEnd,
    DocumentStart,
    DocumentEnd,
    Alias,
    /// A scalar and its value (its text with escapes and folding applied).
    Scalar(String),
    /// `flow`: written `[...]` rather than as `- ` lines.
    SequenceStart {
        flow: bool,
    },
    SequenceEnd,
    /// `flow`: written `{...}` rather than as `key:` lines.
    MappingStart {
        flow: bool,
    },
    MappingEnd,
}

/// One event: what it is and the text it spans.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub kind: Kind,
    pub start: Mark,
    pub end: Mark,
}

/// A syntax error: libyaml's description (a fixed phrase, never a quote of the text) and where.
#[derive(Debug, Clone, thiserror::Error)]
#[error("at {at}: {problem}{}", context.as_ref().map(|(c, m)| format!(", {c} at {m}")).unwrap_or_default())]
pub(crate) struct SyntaxError {
    pub problem: String,
    pub at: Mark,
    /// What the parser was reading when it failed, and where that began.
    pub context: Option<(String, Mark)>,
}

/// The events of a text, in order, ending with [`Kind::StreamEnd`] or the first syntax error.
pub(crate) struct Events<'text> {
    parser: Box<MaybeUninit<unsafe_yaml::yaml_parser_t>>,
    /// Whether the parser was initialized (and must be deleted).
    ready: bool,
    done: bool,
    /// The parser reads the text through a pointer: it must outlive the parser.
    text: PhantomData<&'text str>,
}

impl<'text> Events<'text> {
    #[allow(unsafe_code)] // libyaml's parser: see the SAFETY comments.
    pub fn new(text: &'text str) -> Events<'text> {
        let mut parser = Box::new(MaybeUninit::<unsafe_yaml::yaml_parser_t>::uninit());
        // SAFETY: `yaml_parser_initialize` fills the (boxed, so never moved) parser. It fails only
        // when it cannot allocate, and then has allocated nothing; the events end at once.
        let ready = !unsafe { unsafe_yaml::yaml_parser_initialize(parser.as_mut_ptr()) }.fail;
        if ready {
            // SAFETY: an initialized parser; it reads `text`, which outlives it ('text).
            unsafe {
                unsafe_yaml::yaml_parser_set_encoding(
                    parser.as_mut_ptr(),
                    unsafe_yaml::YAML_UTF8_ENCODING,
                );
                unsafe_yaml::yaml_parser_set_input_string(
                    parser.as_mut_ptr(),
                    text.as_ptr(),
                    text.len() as u64,
                );
            }
        }
        Events {
            parser,
            ready,
            done: !ready,
            text: PhantomData,
        }
    }
}

impl Drop for Events<'_> {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        if self.ready {
            // SAFETY: initialized in `new` (`ready`), deleted once, here.
            unsafe { unsafe_yaml::yaml_parser_delete(self.parser.as_mut_ptr()) }
        }
    }
}

impl Iterator for Events<'_> {
    type Item = Result<Event, SyntaxError>;

    #[allow(unsafe_code)] // libyaml's parser: see the SAFETY comments.
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let sys_parser = self.parser.as_mut_ptr();
        let mut event = MaybeUninit::<unsafe_yaml::yaml_event_t>::uninit();
        // SAFETY: an initialized parser (`done` is set when it is not) and room for one event.
        if unsafe { unsafe_yaml::yaml_parser_parse(sys_parser, event.as_mut_ptr()) }.fail {
            self.done = true;
            // SAFETY: after a failed parse the prefix holds the error; its strings are static C
            // strings of libyaml (or null).
            let parser = unsafe { &*sys_parser };
            let text = |s: *const std::ffi::c_char| {
                (!s.is_null()).then(|| {
                    // SAFETY: a non-null static, NUL-terminated C string of libyaml.
                    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
                })
            };
            return Some(Err(SyntaxError {
                problem: text(parser.problem).unwrap_or_else(|| "a syntax error".to_string()),
                at: Mark::of(parser.problem_mark),
                context: text(parser.context).map(|c| (c, Mark::of(parser.context_mark))),
            }));
        }
        // SAFETY: the parse succeeded, so the event is initialized; its data is read as its type
        // says, and the event is deleted before it goes out of scope.
        let seen = unsafe {
            let event = event.as_mut_ptr();
            let kind = match (*event).type_ {
                unsafe_yaml::YAML_STREAM_START_EVENT => Kind::StreamStart,
                unsafe_yaml::YAML_STREAM_END_EVENT => Kind::StreamEnd,
                unsafe_yaml::YAML_DOCUMENT_START_EVENT => Kind::DocumentStart,
                unsafe_yaml::YAML_DOCUMENT_END_EVENT => Kind::DocumentEnd,
                unsafe_yaml::YAML_ALIAS_EVENT => Kind::Alias,
                unsafe_yaml::YAML_SCALAR_EVENT => {
                    let scalar = (*event).data.scalar;
                    let bytes = std::slice::from_raw_parts(scalar.value, scalar.length as usize);
                    Kind::Scalar(String::from_utf8_lossy(bytes).into_owned())
                }
                unsafe_yaml::YAML_SEQUENCE_START_EVENT => Kind::SequenceStart {
                    flow: (*event).data.sequence_start.style
                        == unsafe_yaml::YAML_FLOW_SEQUENCE_STYLE,
                },
                unsafe_yaml::YAML_SEQUENCE_END_EVENT => Kind::SequenceEnd,
                unsafe_yaml::YAML_MAPPING_START_EVENT => Kind::MappingStart {
                    flow: (*event).data.mapping_start.style == unsafe_yaml::YAML_FLOW_MAPPING_STYLE,
                },
                _ => Kind::MappingEnd,
            };
            let seen = Event {
                kind,
                start: Mark::of((*event).start_mark),
                end: Mark::of((*event).end_mark),
            };
            unsafe_yaml::yaml_event_delete(event);
            seen
        };
        if seen.kind == Kind::StreamEnd {
            self.done = true;
        }
        Some(Ok(seen))
    }
}

/// Why a text is not read further: collections nested too deep, or a syntax error. Shown after
/// "invalid YAML" (`invalid YAML: nested …`, `invalid YAML at line …`).
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum Refused {
    #[error(": nested deeper than {limit} levels at line {line}")]
    TooDeep { limit: usize, line: u64 },
    #[error(" {0}")]
    Syntax(#[from] SyntaxError),
}

/// Reads every event of `text`: an error when collections nest deeper than `limit` (seen before a
/// full parse, whose time grows with the square of the depth) or the text is not YAML.
pub(crate) fn check(text: &str, limit: usize) -> Result<(), Refused> {
    let mut depth = 0usize;
    for event in Events::new(text) {
        let event = event?;
        match event.kind {
            Kind::SequenceStart { .. } | Kind::MappingStart { .. } => {
                depth += 1;
                if depth > limit {
                    return Err(Refused::TooDeep {
                        limit,
                        line: event.start.line,
                    });
                }
            }
            Kind::SequenceEnd | Kind::MappingEnd => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_carry_byte_offsets_of_the_text() {
        let text = "é: [a, \"b\"]\nnext: |\n  x\n";
        let events: Vec<Event> = Events::new(text).map(Result::unwrap).collect();
        let scalars: Vec<(&str, &str)> = events
            .iter()
            .filter_map(|e| match &e.kind {
                Kind::Scalar(v) => Some((v.as_str(), &text[e.start.offset..e.end.offset])),
                _ => None,
            })
            .collect();
        assert_eq!(
            scalars,
            [
                ("é", "é"),
                ("a", "a"),
                ("b", "\"b\""),
                ("next", "next"),
                ("x\n", "|\n  x\n")
            ]
        );
        assert!(events
            .iter()
            .any(|e| e.kind == Kind::SequenceStart { flow: true }));
        assert_eq!(events.last().unwrap().kind, Kind::StreamEnd);
    }

    #[test]
    fn syntax_errors_name_the_place_and_never_quote_the_text() {
        let e = check("secret-value: [\n", 10).unwrap_err();
        let text = format!("invalid YAML{e}");
        assert!(
            text.starts_with("invalid YAML at line 2 column 1: "),
            "{text}"
        );
        assert!(!text.contains("secret"), "{text}");
        let deep = format!("{}{}", "[".repeat(20), "]".repeat(20));
        assert!(matches!(
            check(&deep, 10),
            Err(Refused::TooDeep { line: 1, .. })
        ));
        assert!(check("a: [1, {b: c}]\n", 10).is_ok());
    }
}
