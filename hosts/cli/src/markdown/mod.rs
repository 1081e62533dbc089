//! The model's Markdown, rendered for a terminal as it streams.
//!
//! [`MarkdownStream`] buffers the streamed text and renders each *complete* block
//! (a paragraph ended by a blank line, a closed code fence, a heading line) as soon
//! as it closes; the unfinished tail stays buffered until the next block closes or
//! the message ends ([`MarkdownStream::finish`]). What is printed is never taken
//! back, so the output is stable: a block is rendered once, from its whole text.
//!
//! Rendering ([`render`]): headings, bold, italic, strikethrough, inline code, links
//! (`text (url)`), lists (nested, ordered, task lists), block quotes, rules, code
//! blocks highlighted with syntect's bundled syntaxes and theme, and tables fitted to
//! the width. With colour off (not a terminal, or `NO_COLOR`) the markup characters
//! are removed all the same and no escape sequence is written.
//!
//! Model text cannot drive the terminal: every control character but newline and
//! tab, and every escape sequence, is removed from the text *before* it is parsed
//! ([`strip_controls`]); the only escape sequences in the output are the colours this
//! module writes.

use std::sync::OnceLock;

use pulldown_cmark::{Alignment, CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// How to render.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderOptions {
    /// Write ANSI colours and styles.
    pub color: bool,
    /// The width to wrap text and fit tables to; `None`: no wrapping, tables at their
    /// natural width (output that is not a terminal).
    pub width: Option<usize>,
}

/// Removes what could drive a terminal from untrusted text: escape sequences (CSI,
/// OSC and the other `ESC` forms, with their parameters), C0 controls except newline
/// and tab, DEL and C1 controls. `\r\n` becomes `\n`; a lone `\r` is dropped.
pub fn strip_controls(text: &str) -> std::borrow::Cow<'_, str> {
    let needs = text
        .chars()
        .any(|c| (c.is_control() && c != '\n' && c != '\t') || c == '\u{7f}');
    if !needs {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut it = text.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\x1b' => match it.peek() {
                // CSI: parameters and intermediates, then one final byte.
                Some('[') => {
                    it.next();
                    while let Some(&n) = it.peek() {
                        it.next();
                        if ('\u{40}'..='\u{7e}').contains(&n) {
                            break;
                        }
                    }
                }
                // OSC, DCS, SOS, PM, APC: a string ended by BEL or ESC \.
                Some(']' | 'P' | 'X' | '^' | '_') => {
                    it.next();
                    while let Some(n) = it.next() {
                        if n == '\x07' {
                            break;
                        }
                        if n == '\x1b' {
                            if it.peek() == Some(&'\\') {
                                it.next();
                            }
                            break;
                        }
                    }
                }
                // Two-character sequences (ESC 7, ESC c, …).
                Some(_) => {
                    it.next();
                }
                None => {}
            },
            '\n' | '\t' => out.push(c),
            c if c.is_control() || c == '\u{7f}' => {}
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Renders a whole Markdown text. Blocks are separated by one blank line; the result
/// ends with a newline unless it is empty.
pub fn render(markdown: &str, options: RenderOptions) -> String {
    let clean = strip_controls(markdown);
    let mut r = Renderer::new(options);
    let mut parse_options = Options::empty();
    parse_options.insert(Options::ENABLE_TABLES);
    parse_options.insert(Options::ENABLE_STRIKETHROUGH);
    parse_options.insert(Options::ENABLE_TASKLISTS);
    for event in Parser::new_ext(&clean, parse_options) {
        r.event(event);
    }
    r.finish()
}

/// Streamed Markdown: push the pieces as they arrive, print what comes back.
#[derive(Debug)]
pub struct MarkdownStream {
    options: RenderOptions,
    buffer: String,
    /// Whether a block was printed (the next one starts after a blank line).
    printed: bool,
}

impl MarkdownStream {
    /// An empty stream.
    pub fn new(options: RenderOptions) -> Self {
        MarkdownStream {
            options,
            buffer: String::new(),
            printed: false,
        }
    }

    /// Changes the options for the blocks not yet rendered.
    pub fn set_options(&mut self, options: RenderOptions) {
        self.options = options;
    }

    /// Whether text is buffered.
    pub fn is_pending(&self) -> bool {
        !self.buffer.is_empty()
    }

    /// Adds streamed text; returns the rendering of the blocks it completed (often
    /// empty).
    pub fn push(&mut self, text: &str) -> String {
        self.buffer.push_str(text);
        let cut = complete_prefix(&self.buffer);
        if cut == 0 {
            return String::new();
        }
        let done: String = self.buffer.drain(..cut).collect();
        self.emit(&done)
    }

    /// The message ended: renders what is buffered and starts over.
    pub fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.buffer);
        let out = self.emit(&rest);
        self.printed = false;
        out
    }

    fn emit(&mut self, markdown: &str) -> String {
        let text = render(markdown, self.options);
        if text.is_empty() {
            return text;
        }
        let sep = if self.printed { "\n" } else { "" };
        self.printed = true;
        format!("{sep}{text}")
    }
}

/// The length of the longest prefix of `buf` made of complete blocks: up to the end
/// of a blank line or of a closing code fence, or after an ATX heading line, none of
/// them inside an open code fence.
fn complete_prefix(buf: &str) -> usize {
    let mut cut = 0;
    let mut pos = 0;
    // The open fence: its character and length.
    let mut fence: Option<(char, usize)> = None;
    for line in buf.split_inclusive('\n') {
        if !line.ends_with('\n') {
            break;
        }
        pos += line.len();
        let body = line.trim_end_matches(['\n', '\r']);
        let indent = body.len() - body.trim_start_matches(' ').len();
        let trimmed = body.trim_start_matches(' ');
        let marker = fence_marker(trimmed).filter(|_| indent <= 3);
        match fence {
            Some((ch, len)) => {
                if let Some((c, l)) = marker {
                    let rest = trimmed.trim_start_matches(c);
                    if c == ch && l >= len && rest.trim().is_empty() {
                        fence = None;
                        cut = pos;
                    }
                }
            }
            None => {
                if let Some(m) = marker {
                    fence = Some(m);
                } else if body.trim().is_empty() || (indent == 0 && is_atx_heading(trimmed)) {
                    cut = pos;
                }
            }
        }
    }
    cut
}

fn fence_marker(line: &str) -> Option<(char, usize)> {
    let c = line.chars().next()?;
    if c != '`' && c != '~' {
        return None;
    }
    let n = line.chars().take_while(|&x| x == c).count();
    if n < 3 {
        return None;
    }
    // A backtick fence's info string holds no backtick.
    if c == '`' && line[n..].contains('`') {
        return None;
    }
    Some((c, n))
}

fn is_atx_heading(line: &str) -> bool {
    let hashes = line.chars().take_while(|&c| c == '#').count();
    (1..=6).contains(&hashes)
        && line[hashes..]
            .chars()
            .next()
            .is_none_or(|c| c == ' ' || c == '\t')
}

mod blocks;
mod highlight;
mod inline;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

use self::blocks::Renderer;
