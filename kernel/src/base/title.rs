//! Session titles: `session.set_title`, and the title the kernel generates after a
//! request when the session has none.
//!
//! The generated title is the first line of the session's first user message,
//! trimmed, with control characters turned into spaces, cut at 60 characters at a
//! word boundary. No model call: it is instant, free, and the same offline.

use keel_envelope::{ErrorCode, ErrorPayload};

/// Longest title `session.set_title` accepts, in characters.
pub const MAX_TITLE_CHARS: usize = 200;
/// Longest generated title, in characters.
pub const GENERATED_TITLE_CHARS: usize = 60;

/// Checks a title given by a host; returns it trimmed.
pub(crate) fn validate(raw: &str) -> Result<String, ErrorPayload> {
    let bad = |message: String| {
        Err(ErrorPayload::new(ErrorCode::RequestInvalid, message)
            .with_detail("field", "payload.title"))
    };
    let title = raw.trim();
    if title.is_empty() {
        return bad("the title is empty".into());
    }
    let chars = title.chars().count();
    if chars > MAX_TITLE_CHARS {
        return bad(format!(
            "the title has {chars} characters; at most {MAX_TITLE_CHARS} are allowed"
        ));
    }
    if let Some(c) = title.chars().find(|c| c.is_control()) {
        return bad(format!(
            "the title contains the control character U+{:04X}",
            u32::from(c)
        ));
    }
    Ok(title.to_owned())
}

/// The title generated from a user message: its first non-blank line, trimmed, control
/// characters replaced by spaces, cut at [`GENERATED_TITLE_CHARS`] characters at the
/// last word boundary (mid-word only when the first word alone is longer). `None`
/// when the message has no visible text.
pub fn generate(message: &str) -> Option<String> {
    let line = message.lines().map(str::trim).find(|l| !l.is_empty())?;
    let clean: String = line
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let clean = clean.trim();
    if clean.chars().count() <= GENERATED_TITLE_CHARS {
        return Some(clean.to_owned());
    }
    // The byte index just past the first GENERATED_TITLE_CHARS characters.
    let end = clean
        .char_indices()
        .nth(GENERATED_TITLE_CHARS)
        .map_or(clean.len(), |(i, _)| i);
    let head = &clean[..end];
    // Cut at a word boundary: the next character is a space, or at the last space.
    let next_is_space = clean[end..].starts_with(char::is_whitespace);
    let cut = if next_is_space {
        head
    } else {
        match head.rfind(char::is_whitespace) {
            Some(i) if !head[..i].trim().is_empty() => &head[..i],
            _ => head,
        }
    };
    Some(cut.trim_end().to_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn short_first_lines_are_kept_whole() {
        assert_eq!(
            generate("  Fix the parser  \nand more").as_deref(),
            Some("Fix the parser")
        );
        assert_eq!(
            generate("\n\n  \nSecond line first").as_deref(),
            Some("Second line first")
        );
        assert_eq!(generate("a\tb").as_deref(), Some("a b"));
        assert_eq!(generate(" \n\t\n"), None);
    }

    #[test]
    fn long_lines_are_cut_at_a_word_boundary() {
        let msg = "Please refactor the configuration loader so that it reads every file once";
        let t = generate(msg).unwrap();
        assert_eq!(
            t,
            "Please refactor the configuration loader so that it reads"
        );
        assert!(t.chars().count() <= GENERATED_TITLE_CHARS);
        // Exactly at a space: the whole head is kept.
        let exact = format!("{} tail", "x".repeat(GENERATED_TITLE_CHARS));
        assert_eq!(generate(&exact).unwrap(), "x".repeat(GENERATED_TITLE_CHARS));
        // One long word: cut mid-word, never longer than the limit.
        let word = "é".repeat(100);
        assert_eq!(generate(&word).unwrap(), "é".repeat(GENERATED_TITLE_CHARS));
    }

    #[test]
    fn host_titles_are_checked() {
        assert_eq!(validate("  My title ").unwrap(), "My title");
        for bad in ["", "   ", "a\u{7}b", "line\nbreak"] {
            let e = validate(bad).unwrap_err();
            assert_eq!(e.code, ErrorCode::RequestInvalid);
            assert_eq!(e.details["field"], "payload.title");
        }
        assert!(validate(&"t".repeat(MAX_TITLE_CHARS)).is_ok());
        let e = validate(&"t".repeat(MAX_TITLE_CHARS + 1)).unwrap_err();
        assert!(e.message.contains("201"), "{}", e.message);
    }
}
