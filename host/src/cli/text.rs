//! Text for people at a terminal: tables and lines that fit its width ([`width`]: `COLUMNS`, else the
//! terminal's, else 100). What does not fit wraps onto more lines; a count, an error or a signature
//! state is never cut.

use std::io::IsTerminal as _;

/// The width when neither `COLUMNS` nor a terminal says (a pipe, a file): as wide as a review reads.
pub(super) const DEFAULT_WIDTH: usize = 100;

/// The narrowest a wrapping column gets, whatever the width.
const MIN_WRAP: usize = 10;

/// The width text fits: `COLUMNS` of `config` when it is a number (as shells and `watch` set it),
/// else the width of the terminal stdout is, else [`DEFAULT_WIDTH`].
pub(super) fn width(config: &crate::config::Config) -> usize {
    if let Some(columns) = config
        .columns()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|c| *c > 0)
    {
        return columns;
    }
    if std::io::stdout().is_terminal() {
        if let Some(columns) = terminal_columns() {
            return columns;
        }
    }
    DEFAULT_WIDTH
}

/// The columns of the terminal on stdout, if it says.
#[allow(unsafe_code)] // An ioctl: see the SAFETY comment.
fn terminal_columns() -> Option<usize> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` through the pointer, which points at a live, writable
    // `winsize` of our own; on failure it writes nothing and returns -1.
    let done = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) };
    (done == 0 && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

/// Whether `c` is shown escaped: a control character (C0, DEL, C1: ESC starts a terminal's escape
/// sequences, CR rewrites a line) or one that reorders or hides text (bidi embeddings, overrides,
/// isolates and marks, zero-width characters), so that no name a ConfigMap, a directory or a status
/// file gives can restyle, hide or reorder what the operator reads.
fn escaped_char(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2069}' | '\u{FEFF}')
}

/// `text` with every character [`escaped_char`] names written as `\u{…}`; newlines are kept when
/// `keep_newlines` (whole output whose lines are ours), escaped otherwise (one cell, one name).
fn escape(text: &str, keep_newlines: bool) -> std::borrow::Cow<'_, str> {
    if !text
        .chars()
        .any(|c| escaped_char(c) && !(keep_newlines && c == '\n'))
    {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if escaped_char(c) && !(keep_newlines && c == '\n') {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Human output as it may be printed: its lines kept, every other control or bidi character
/// escaped (JSON output is printed as it is: its own escaping is exact).
pub(super) fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    escape(text, true)
}

/// `text` cut to `width` characters, an ellipsis marking the cut: only for what may be shortened
/// (a value shown whole elsewhere), never a count, an error or a signature state.
pub(super) fn cut(text: &str, width: usize) -> String {
    let text = &*escape(text, false);
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// `text` wrapped to `width` (its leading spaces kept on the first line), each line after the first
/// indented by `indent` spaces; a word longer than a line is broken, nothing is left out. Ends with a
/// newline.
pub(super) fn wrap(text: &str, width: usize, indent: usize) -> String {
    let text = &*escape(text, true);
    let body = text.trim_start_matches(' ');
    let first = " ".repeat(text.len() - body.len());
    let pad = " ".repeat(indent);
    let options = textwrap::Options::new(width.max(indent.max(first.len()) + MIN_WRAP))
        .initial_indent(&first)
        .subsequent_indent(&pad);
    let mut out = String::new();
    for line in textwrap::wrap(body, options) {
        out.push_str(line.trim_end());
        out.push('\n');
    }
    if out.is_empty() {
        out.push('\n');
    }
    out
}

/// How a column of a [`table`] is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Column {
    /// Left-aligned, kept on one line (a kind, a role).
    Fixed,
    /// Right-aligned, kept on one line (a count).
    Number,
    /// Left-aligned, wrapped onto more lines when the table is too wide (a name, a source).
    Wraps,
}

/// Rows (the first is the header) as columns two spaces apart, fitting `width`: when they are too
/// wide, the widest wrapping columns narrow (to [`MIN_WRAP`] at least) and their cells continue on
/// the lines below. Every character of every cell is printed.
pub(super) fn table(rows: &[Vec<String>], columns: &[Column], width: usize) -> String {
    // Each cell one line of printable text: what it holds may come from anyone's ConfigMap.
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|cell| escape(cell, false).into_owned())
                .collect()
        })
        .collect();
    let rows = rows.as_slice();
    let count = columns.len();
    let mut widths = vec![0usize; count];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    // A wrapping column keeps room for its header's longest word.
    let floors: Vec<usize> = (0..count)
        .map(|i| {
            let header = rows
                .first()
                .and_then(|r| r.get(i))
                .map_or("", String::as_str);
            let word = header
                .split(' ')
                .map(|w| w.chars().count())
                .max()
                .unwrap_or(0);
            word.max(MIN_WRAP)
        })
        .collect();
    let total = |widths: &[usize]| widths.iter().sum::<usize>() + 2 * count.saturating_sub(1);
    while total(&widths) > width {
        // The widest column that may still narrow gives up what is too much, down to the next one.
        let Some((widest, _)) = widths
            .iter()
            .enumerate()
            .filter(|(i, w)| columns[*i] == Column::Wraps && **w > floors[*i])
            .max_by_key(|(_, w)| **w)
        else {
            break;
        };
        let next = widths
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != widest && columns[*i] == Column::Wraps)
            .map(|(_, w)| *w)
            .max()
            .unwrap_or(0)
            .max(floors[widest]);
        let excess = total(&widths) - width;
        let step = excess.min(widths[widest] - next).max(1);
        widths[widest] -= step;
    }
    let mut out = String::new();
    for row in rows {
        let cells: Vec<Vec<String>> = row
            .iter()
            .zip(widths.iter().zip(columns))
            .map(|(cell, (w, column))| match column {
                Column::Wraps if cell.chars().count() > *w => textwrap::wrap(cell, *w)
                    .into_iter()
                    .map(|l| l.into_owned())
                    .collect(),
                _ => vec![cell.clone()],
            })
            .collect();
        let height = cells.iter().map(Vec::len).max().unwrap_or(1);
        for line in 0..height {
            let parts: Vec<String> = cells
                .iter()
                .zip(widths.iter().zip(columns))
                .map(|(lines, (w, column))| {
                    let text = lines.get(line).map(String::as_str).unwrap_or("");
                    match column {
                        Column::Number => format!("{text:>w$}"),
                        _ => format!("{text:<w$}"),
                    }
                })
                .collect();
            out.push_str(parts.join("  ").trim_end());
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_escapes_and_bidi_overrides_are_shown_escaped() {
        let name = "evil\u{1b}[2J\u{202e}cod.exe\r\u{9b}";
        let rows = vec![vec!["NAME".to_string()], vec![name.to_string()]];
        let shown = table(&rows, &[Column::Wraps], 100);
        assert_eq!(shown, "NAME\nevil\\u{1b}[2J\\u{202e}cod.exe\\u{d}\\u{9b}\n");
        assert_eq!(cut("a\nb", 10), "a\\u{a}b");
        assert_eq!(wrap("x\u{1b}y", 80, 0), "x\\u{1b}y\n");
        assert_eq!(printable("line\u{7}\nnext é\n"), "line\\u{7}\nnext é\n");
        assert!(matches!(
            printable("plain\n"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn cuts_at_a_character_and_marks_the_cut() {
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("éééééé", 4), "ééé…");
    }

    #[test]
    fn a_table_too_wide_wraps_its_widest_cells_and_keeps_every_character() {
        let rows = vec![
            vec!["NAME".to_string(), "N".to_string(), "SIGNATURE".to_string()],
            vec![
                "kubevirt".to_string(),
                "123456789012".to_string(),
                "0123456789abcdef (not verified)".to_string(),
            ],
        ];
        let columns = [Column::Wraps, Column::Number, Column::Wraps];
        let wide = table(&rows, &columns, 200);
        assert_eq!(wide.lines().count(), 2, "{wide}");
        let narrow = table(&rows, &columns, 40);
        assert!(narrow.lines().all(|l| l.chars().count() <= 40), "{narrow}");
        assert!(narrow.contains("123456789012"), "{narrow}");
        let words: String = narrow.split_whitespace().collect();
        assert!(words.contains("0123456789abcdef(notverified)"), "{narrow}");
        // Columns that do not wrap stay whole even past the width.
        let tight = table(&rows, &columns, 5);
        assert!(tight.contains("123456789012"), "{tight}");
    }

    #[test]
    fn wrapped_text_keeps_every_word_and_indents_what_follows() {
        let text = wrap("one two three four five six", 12, 2);
        assert_eq!(text, "one two\n  three four\n  five six\n");
        assert_eq!(wrap("    replace /a 1", 80, 6), "    replace /a 1\n");
    }
}
