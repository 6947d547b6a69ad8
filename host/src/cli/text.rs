//! Text for people at a terminal: what several commands print is cut to the terminal's width.

/// `text` cut to `width` characters, an ellipsis marking the cut.
pub(super) fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::cut;

    #[test]
    fn cuts_at_a_character_and_marks_the_cut() {
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("éééééé", 4), "ééé…");
    }
}
