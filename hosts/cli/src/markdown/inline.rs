//! Inline spans: text with its styles, and how wide it is on screen.

use super::*;

/// Inline style flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Inline {
    pub(super) strong: bool,
    pub(super) emphasis: bool,
    pub(super) strike: bool,
    pub(super) code: bool,
    pub(super) link: bool,
    pub(super) dim: bool,
    pub(super) heading: Option<HeadingLevel>,
}

impl Inline {
    pub(super) fn sgr(self) -> String {
        let mut codes: Vec<&str> = Vec::new();
        match self.heading {
            Some(HeadingLevel::H1) => codes.extend(["1", "4", "35"]),
            Some(HeadingLevel::H2) => codes.extend(["1", "35"]),
            Some(_) => codes.extend(["1", "36"]),
            None => {}
        }
        if self.strong {
            codes.push("1");
        }
        if self.dim {
            codes.push("2");
        }
        if self.emphasis {
            codes.push("3");
        }
        if self.strike {
            codes.push("9");
        }
        if self.link {
            codes.extend(["4", "34"]);
        }
        if self.code {
            codes.push("33");
        }
        codes.dedup();
        codes.join(";")
    }
}

pub(super) fn paint(color: bool, codes: &str, text: &str) -> String {
    if color && !codes.is_empty() && !text.is_empty() {
        format!("\x1b[{codes}m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

/// A word (or forced line break) of inline text, for wrapping.
#[derive(Debug, Clone)]
pub(super) enum Token {
    Word {
        text: String,
        style: Inline,
        /// Whether a space separates it from the previous word.
        space: bool,
    },
    Break,
}

/// Inline content being collected (a paragraph, a heading, a table cell).
#[derive(Debug, Default, Clone)]
pub(super) struct Spans {
    pub(super) tokens: Vec<Token>,
    pub(super) pending_space: bool,
}

impl Spans {
    /// Adds text: split into words at spaces; a word not preceded by a space is
    /// glued to the previous one (`**a**b`), so a line never breaks between them.
    pub(super) fn push_text(&mut self, text: &str, style: Inline) {
        for (i, part) in text.split(' ').enumerate() {
            if i > 0 {
                self.pending_space = true;
            }
            if part.is_empty() {
                continue;
            }
            self.tokens.push(Token::Word {
                text: part.to_owned(),
                style,
                space: self.pending_space,
            });
            self.pending_space = false;
        }
    }

    pub(super) fn space(&mut self) {
        self.pending_space = true;
    }

    pub(super) fn hard_break(&mut self) {
        self.tokens.push(Token::Break);
        self.pending_space = false;
    }

    pub(super) fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    pub(super) fn plain_width(&self) -> usize {
        self.tokens
            .iter()
            .map(|t| match t {
                Token::Word { text, space, .. } => text.width() + usize::from(*space),
                Token::Break => 0,
            })
            .sum::<usize>()
    }

    /// The longest single word.
    pub(super) fn min_width(&self) -> usize {
        self.tokens
            .iter()
            .map(|t| match t {
                Token::Word { text, .. } => text.width(),
                Token::Break => 0,
            })
            .max()
            .unwrap_or(0)
    }

    /// Wrapped lines, each as (styled text, plain width).
    pub(super) fn wrap(&self, width: Option<usize>, color: bool) -> Vec<(String, usize)> {
        let max = width.unwrap_or(usize::MAX).max(1);
        let mut lines = Vec::new();
        let mut line = String::new();
        let mut used = 0usize;
        for t in &self.tokens {
            match t {
                Token::Break => {
                    lines.push((std::mem::take(&mut line), used));
                    used = 0;
                }
                Token::Word { text, style, space } => {
                    let w = text.width();
                    let gap = usize::from(*space && used > 0);
                    if used > 0 && used + gap + w > max && *space {
                        lines.push((std::mem::take(&mut line), used));
                        used = 0;
                    } else if gap == 1 {
                        line.push(' ');
                        used += 1;
                    }
                    // Hard-split a word longer than a whole line.
                    let mut rest = text.as_str();
                    while used == 0 && rest.width() > max {
                        let mut take = fit(rest, max);
                        if take == 0 {
                            take = rest.chars().next().map_or(rest.len(), char::len_utf8);
                        }
                        line.push_str(&paint(color, &style.sgr(), &rest[..take]));
                        lines.push((std::mem::take(&mut line), rest[..take].width()));
                        rest = &rest[take..];
                    }
                    used += rest.width();
                    line.push_str(&paint(color, &style.sgr(), rest));
                }
            }
        }
        if used > 0 || !line.is_empty() || lines.is_empty() {
            lines.push((line, used));
        }
        lines
    }
}

/// The byte length of the longest prefix of `s` at most `cols` columns wide.
pub(super) fn fit(s: &str, cols: usize) -> usize {
    let mut used = 0;
    for (i, c) in s.char_indices() {
        let w = c.width().unwrap_or(0);
        if used + w > cols {
            return i;
        }
        used += w;
    }
    s.len()
}
