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

/// Inline style flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Inline {
    strong: bool,
    emphasis: bool,
    strike: bool,
    code: bool,
    link: bool,
    dim: bool,
    heading: Option<HeadingLevel>,
}

impl Inline {
    fn sgr(self) -> String {
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

fn paint(color: bool, codes: &str, text: &str) -> String {
    if color && !codes.is_empty() && !text.is_empty() {
        format!("\x1b[{codes}m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

/// A word (or forced line break) of inline text, for wrapping.
#[derive(Debug, Clone)]
enum Token {
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
struct Spans {
    tokens: Vec<Token>,
    pending_space: bool,
}

impl Spans {
    /// Adds text: split into words at spaces; a word not preceded by a space is
    /// glued to the previous one (`**a**b`), so a line never breaks between them.
    fn push_text(&mut self, text: &str, style: Inline) {
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

    fn space(&mut self) {
        self.pending_space = true;
    }

    fn hard_break(&mut self) {
        self.tokens.push(Token::Break);
        self.pending_space = false;
    }

    fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    fn plain_width(&self) -> usize {
        self.tokens
            .iter()
            .map(|t| match t {
                Token::Word { text, space, .. } => text.width() + usize::from(*space),
                Token::Break => 0,
            })
            .sum::<usize>()
    }

    /// The longest single word.
    fn min_width(&self) -> usize {
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
    fn wrap(&self, width: Option<usize>, color: bool) -> Vec<(String, usize)> {
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
fn fit(s: &str, cols: usize) -> usize {
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

#[derive(Debug)]
enum Container {
    Quote,
    List { next: Option<u64> },
    Item { marker: String, used: bool },
}

#[derive(Debug, Default)]
struct Table {
    align: Vec<Alignment>,
    rows: Vec<Vec<Spans>>,
    header_rows: usize,
    in_head: bool,
}

/// The event-driven renderer.
#[derive(Debug)]
struct Renderer {
    opts: RenderOptions,
    out: String,
    containers: Vec<Container>,
    style: Inline,
    spans: Spans,
    /// A blank line is due before the next block.
    blank: bool,
    code: Option<(String, String)>,
    table: Option<Table>,
    links: Vec<String>,
}

impl Renderer {
    fn new(opts: RenderOptions) -> Self {
        Renderer {
            opts,
            out: String::new(),
            containers: Vec::new(),
            style: Inline::default(),
            spans: Spans::default(),
            blank: false,
            code: None,
            table: None,
            links: Vec::new(),
        }
    }

    fn color(&self) -> bool {
        self.opts.color
    }

    /// The prefix of the next line, and its width; consumes list markers.
    fn prefix(&mut self) -> (String, usize) {
        let color = self.opts.color;
        let mut s = String::new();
        let mut w = 0;
        for c in &mut self.containers {
            match c {
                Container::Quote => {
                    let bar = if color { "│ " } else { "> " };
                    s.push_str(&paint(color, "2", bar));
                    w += 2;
                }
                Container::List { .. } => {}
                Container::Item { marker, used } => {
                    let mw = marker.width();
                    if *used {
                        s.push_str(&" ".repeat(mw));
                    } else {
                        s.push_str(&paint(color, "1;36", marker));
                        *used = true;
                    }
                    w += mw;
                }
            }
        }
        (s, w)
    }

    /// The width left for text after the prefix.
    fn text_width(&self) -> Option<usize> {
        let taken: usize = self
            .containers
            .iter()
            .map(|c| match c {
                Container::Quote => 2,
                Container::List { .. } => 0,
                Container::Item { marker, .. } => marker.width(),
            })
            .sum();
        self.opts.width.map(|w| w.saturating_sub(taken).max(20))
    }

    fn start_block(&mut self) {
        if self.blank && !self.out.is_empty() {
            let (p, _) = self.blank_prefix();
            self.out.push_str(p.trim_end());
            self.out.push('\n');
        }
        self.blank = false;
    }

    /// The prefix of a blank line inside the containers (quote bars only).
    fn blank_prefix(&self) -> (String, usize) {
        let mut s = String::new();
        for c in &self.containers {
            if matches!(c, Container::Quote) {
                let bar = if self.opts.color { "│" } else { ">" };
                s.push_str(&paint(self.opts.color, "2", bar));
                s.push(' ');
            }
        }
        (s, 0)
    }

    fn line(&mut self, text: &str) {
        let (p, _) = self.prefix();
        self.out.push_str(&p);
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn flush_spans(&mut self) {
        if self.spans.is_empty() {
            return;
        }
        let spans = std::mem::take(&mut self.spans);
        self.start_block();
        for (l, _) in spans.wrap(self.text_width(), self.color()) {
            self.line(&l);
        }
    }

    fn end_block(&mut self) {
        self.blank = true;
    }

    fn text(&mut self, text: &str) {
        if let Some((_, code)) = &mut self.code {
            code.push_str(text);
            return;
        }
        let style = self.style;
        let spans = self.current_spans();
        // Newlines inside inline text (HTML, for instance) are spaces.
        for (i, part) in text.split('\n').enumerate() {
            if i > 0 {
                spans.space();
            }
            spans.push_text(part, style);
        }
    }

    fn current_spans(&mut self) -> &mut Spans {
        if let Some(t) = &mut self.table {
            if let Some(cell) = t.rows.last_mut().and_then(|r| r.last_mut()) {
                return cell;
            }
        }
        &mut self.spans
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => self.text(&t),
            Event::Code(t) => {
                let style = Inline {
                    code: true,
                    ..self.style
                };
                let t = t.replace('\n', " ");
                self.current_spans().push_text(&t, style);
            }
            Event::InlineMath(t) | Event::DisplayMath(t) => {
                let style = self.style;
                self.current_spans().push_text(&t, style);
            }
            Event::Html(t) | Event::InlineHtml(t) => self.text(&t),
            Event::SoftBreak => self.current_spans().space(),
            Event::HardBreak => self.current_spans().hard_break(),
            Event::Rule => {
                self.flush_spans();
                self.start_block();
                let w = self.text_width().unwrap_or(40).min(40);
                let ch = if self.color() { "─" } else { "-" };
                let rule = paint(self.color(), "2", &ch.repeat(w));
                self.line(&rule);
                self.end_block();
            }
            Event::TaskListMarker(done) => {
                let style = self.style;
                let mark = if done { "[x]" } else { "[ ]" };
                self.current_spans().push_text(mark, style);
                self.current_spans().space();
            }
            Event::FootnoteReference(name) => {
                let style = self.style;
                self.current_spans().push_text(&format!("[{name}]"), style);
            }
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => self.flush_spans(),
            Tag::Heading { level, .. } => {
                self.flush_spans();
                self.style.heading = Some(level);
            }
            Tag::BlockQuote(_) => {
                self.flush_spans();
                self.start_block();
                self.containers.push(Container::Quote);
            }
            Tag::CodeBlock(kind) => {
                self.flush_spans();
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => {
                        info.split([' ', ',', '{']).next().unwrap_or("").to_owned()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((lang, String::new()));
            }
            Tag::List(start) => {
                self.flush_spans();
                if !self
                    .containers
                    .iter()
                    .any(|c| matches!(c, Container::Item { .. }))
                {
                    self.start_block();
                }
                self.containers.push(Container::List { next: start });
            }
            Tag::Item => {
                self.flush_spans();
                let marker = match self.containers.last_mut() {
                    Some(Container::List { next: Some(n) }) => {
                        let m = format!("{n}. ");
                        *n += 1;
                        m
                    }
                    _ => {
                        let depth = self
                            .containers
                            .iter()
                            .filter(|c| matches!(c, Container::List { .. }))
                            .count();
                        let bullet = match (self.opts.color, depth % 2) {
                            (false, _) => "-",
                            (true, 1) => "•",
                            (true, _) => "◦",
                        };
                        format!("{bullet} ")
                    }
                };
                self.containers.push(Container::Item {
                    marker,
                    used: false,
                });
            }
            Tag::Emphasis => self.style.emphasis = true,
            Tag::Strong => self.style.strong = true,
            Tag::Strikethrough => self.style.strike = true,
            Tag::Link { dest_url, .. } => {
                self.style.link = true;
                self.links.push(dest_url.to_string());
            }
            Tag::Image { dest_url, .. } => {
                self.links.push(dest_url.to_string());
                let style = self.style;
                self.current_spans().push_text("[image: ", style);
            }
            Tag::Table(align) => {
                self.flush_spans();
                self.table = Some(Table {
                    align,
                    ..Table::default()
                });
            }
            Tag::TableHead => {
                if let Some(t) = &mut self.table {
                    t.in_head = true;
                    t.rows.push(Vec::new());
                }
            }
            Tag::TableRow => {
                if let Some(t) = &mut self.table {
                    t.rows.push(Vec::new());
                }
            }
            Tag::TableCell => {
                if let Some(row) = self.table.as_mut().and_then(|t| t.rows.last_mut()) {
                    row.push(Spans::default());
                }
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => {
                self.flush_spans();
                self.end_block();
            }
            TagEnd::Heading(_) => {
                self.flush_spans();
                self.style.heading = None;
                self.end_block();
            }
            TagEnd::BlockQuote(_) => {
                self.flush_spans();
                self.containers.pop();
                self.end_block();
            }
            TagEnd::CodeBlock => {
                if let Some((lang, code)) = self.code.take() {
                    self.code_block(&lang, &code);
                }
                self.end_block();
            }
            TagEnd::List(_) => {
                self.flush_spans();
                self.containers.pop();
                if !self
                    .containers
                    .iter()
                    .any(|c| matches!(c, Container::Item { .. }))
                {
                    self.end_block();
                }
            }
            TagEnd::Item => {
                self.flush_spans();
                // An item with nothing in it still shows its marker.
                if matches!(
                    self.containers.last(),
                    Some(Container::Item { used: false, .. })
                ) {
                    self.line("");
                }
                self.containers.pop();
            }
            TagEnd::Emphasis => self.style.emphasis = false,
            TagEnd::Strong => self.style.strong = false,
            TagEnd::Strikethrough => self.style.strike = false,
            TagEnd::Link => {
                self.style.link = false;
                if let Some(url) = self.links.pop() {
                    self.after_link(&url);
                }
            }
            TagEnd::Image => {
                let style = self.style;
                self.current_spans().push_text("]", style);
                if let Some(url) = self.links.pop() {
                    self.after_link(&url);
                }
            }
            TagEnd::TableHead => {
                if let Some(t) = &mut self.table {
                    t.in_head = false;
                    t.header_rows = t.rows.len();
                }
            }
            TagEnd::Table => {
                if let Some(t) = self.table.take() {
                    self.render_table(t);
                }
                self.end_block();
            }
            _ => {}
        }
    }

    /// ` (url)` after a link whose text is not the URL itself.
    fn after_link(&mut self, url: &str) {
        if url.is_empty() || url.starts_with('#') {
            return;
        }
        let spans = self.current_spans();
        let shown: String = spans
            .tokens
            .iter()
            .rev()
            .take(1)
            .filter_map(|t| match t {
                Token::Word { text, .. } => Some(text.clone()),
                Token::Break => None,
            })
            .collect();
        let bare = url.trim_start_matches("mailto:");
        if shown == url || shown == bare {
            return;
        }
        let style = Inline {
            dim: true,
            ..Inline::default()
        };
        spans.space();
        spans.push_text(&format!("({url})"), style);
    }

    fn code_block(&mut self, lang: &str, code: &str) {
        self.start_block();
        let color = self.color();
        if color && !lang.is_empty() {
            let label = paint(true, "2", lang);
            self.line(&format!("  {label}"));
        }
        let code = code.strip_suffix('\n').unwrap_or(code);
        let lines: Vec<String> = if color {
            highlight(lang, code)
        } else {
            code.split('\n').map(str::to_owned).collect()
        };
        for l in lines {
            let text = format!("    {l}");
            self.line(text.trim_end_matches(' '));
        }
    }

    fn render_table(&mut self, t: Table) {
        let color = self.color();
        let cols = t.rows.iter().map(Vec::len).max().unwrap_or(0);
        if cols == 0 {
            return;
        }
        self.start_block();
        let natural: Vec<usize> = (0..cols)
            .map(|c| {
                t.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(Spans::plain_width)
                    .max()
                    .unwrap_or(0)
                    .max(1)
            })
            .collect();
        let minimum: Vec<usize> = (0..cols)
            .map(|c| {
                t.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(Spans::min_width)
                    .max()
                    .unwrap_or(1)
                    .clamp(1, 12)
            })
            .collect();
        let sep_width = 3 * (cols - 1);
        let widths = match self.text_width() {
            Some(w) => fit_columns(&natural, &minimum, w.saturating_sub(sep_width)),
            None => natural,
        };
        let (bar, cross, rule) = if color {
            (" │ ", "─┼─", "─")
        } else {
            (" | ", "-+-", "-")
        };
        for (i, row) in t.rows.iter().enumerate() {
            let header = i < t.header_rows;
            let cells: Vec<Vec<(String, usize)>> = (0..cols)
                .map(|c| {
                    let empty = Spans::default();
                    let mut spans = row.get(c).cloned().unwrap_or(empty);
                    if header {
                        for tok in &mut spans.tokens {
                            if let Token::Word { style, .. } = tok {
                                style.strong = true;
                            }
                        }
                    }
                    spans.wrap(Some(widths[c]), color)
                })
                .collect();
            let height = cells.iter().map(Vec::len).max().unwrap_or(1);
            for l in 0..height {
                let mut line = String::new();
                for (c, cell) in cells.iter().enumerate() {
                    if c > 0 {
                        line.push_str(&paint(color, "2", bar));
                    }
                    let (text, w) = cell.get(l).cloned().unwrap_or_default();
                    let pad = widths[c].saturating_sub(w);
                    let (left, right) = match t.align.get(c) {
                        Some(Alignment::Right) => (pad, 0),
                        Some(Alignment::Center) => (pad / 2, pad - pad / 2),
                        _ => (0, pad),
                    };
                    line.push_str(&" ".repeat(left));
                    line.push_str(&text);
                    line.push_str(&" ".repeat(right));
                }
                self.line(line.trim_end());
            }
            if header && i + 1 == t.header_rows {
                let parts: Vec<String> = widths.iter().map(|w| rule.repeat(*w)).collect();
                let line = paint(color, "2", &parts.join(cross));
                self.line(&line);
            }
        }
    }

    fn finish(mut self) -> String {
        self.flush_spans();
        if let Some((lang, code)) = self.code.take() {
            self.code_block(&lang, &code);
        }
        if let Some(t) = self.table.take() {
            self.render_table(t);
        }
        self.out
    }
}

/// Column widths that fit `total`: the natural widths when they fit; otherwise the
/// columns narrower than a fair share keep their width and the others share the rest
/// (never below their minimum, so a table wider than the terminal can remain).
fn fit_columns(natural: &[usize], minimum: &[usize], total: usize) -> Vec<usize> {
    if natural.iter().sum::<usize>() <= total {
        return natural.to_vec();
    }
    let mut widths = vec![0; natural.len()];
    let mut open: Vec<usize> = (0..natural.len()).collect();
    let mut left = total;
    loop {
        let share = left / open.len().max(1);
        let (small, big): (Vec<usize>, Vec<usize>) =
            open.iter().partition(|&&c| natural[c] <= share);
        if small.is_empty() {
            let n = big.len().max(1);
            for (k, &c) in big.iter().enumerate() {
                let extra = usize::from(k < left % n);
                widths[c] = (left / n + extra).max(minimum[c]).max(1);
            }
            break;
        }
        for &c in &small {
            widths[c] = natural[c];
            left = left.saturating_sub(natural[c]);
        }
        open = big;
        if open.is_empty() {
            break;
        }
    }
    widths
}

/// Syntaxes and the theme, loaded once (bundled with syntect, no network).
fn highlighting() -> &'static (syntect::parsing::SyntaxSet, syntect::highlighting::Theme) {
    static SETS: OnceLock<(syntect::parsing::SyntaxSet, syntect::highlighting::Theme)> =
        OnceLock::new();
    SETS.get_or_init(|| {
        let syntaxes = syntect::parsing::SyntaxSet::load_defaults_newlines();
        let mut themes = syntect::highlighting::ThemeSet::load_defaults();
        let theme = themes
            .themes
            .remove("base16-ocean.dark")
            .or_else(|| themes.themes.into_values().next())
            .unwrap_or_default();
        (syntaxes, theme)
    })
}

/// Whether the terminal takes 24-bit colours (`COLORTERM`).
fn truecolor() -> bool {
    static TRUE: OnceLock<bool> = OnceLock::new();
    *TRUE.get_or_init(|| std::env::var("COLORTERM").is_ok_and(|v| v == "truecolor" || v == "24bit"))
}

/// The code's lines with colours for `lang` (a name or file extension); plain lines
/// when the language is unknown.
fn highlight(lang: &str, code: &str) -> Vec<String> {
    use syntect::easy::HighlightLines;
    let (syntaxes, theme) = highlighting();
    let syntax = (!lang.is_empty())
        .then(|| syntaxes.find_syntax_by_token(lang))
        .flatten();
    let Some(syntax) = syntax else {
        return code.split('\n').map(str::to_owned).collect();
    };
    let mut h = HighlightLines::new(syntax, theme);
    let mut out = Vec::new();
    for line in code.split('\n') {
        let with_nl = format!("{line}\n");
        match h.highlight_line(&with_nl, syntaxes) {
            Ok(ranges) => {
                let mut s = String::new();
                for (style, text) in ranges {
                    let text = text.trim_end_matches('\n');
                    if text.is_empty() {
                        continue;
                    }
                    let fg = style.foreground;
                    let code = if truecolor() {
                        format!("38;2;{};{};{}", fg.r, fg.g, fg.b)
                    } else {
                        format!("38;5;{}", ansi256(fg.r, fg.g, fg.b))
                    };
                    s.push_str(&paint(true, &code, text));
                }
                out.push(s);
            }
            Err(_) => out.push(line.to_owned()),
        }
    }
    out
}

/// The nearest colour of the xterm 256-colour palette (6×6×6 cube or grey ramp).
fn ansi256(r: u8, g: u8, b: u8) -> u8 {
    let level = |v: u8| -> u8 {
        if v < 48 {
            0
        } else if v < 115 {
            1
        } else {
            (v - 35) / 40
        }
    };
    let (lr, lg, lb) = (level(r), level(g), level(b));
    let cube = 16 + 36 * lr + 6 * lg + lb;
    let steps = [0u8, 95, 135, 175, 215, 255];
    let cube_rgb = (steps[lr as usize], steps[lg as usize], steps[lb as usize]);
    let avg = (u16::from(r) + u16::from(g) + u16::from(b)) / 3;
    let grey_idx = if avg > 238 {
        23
    } else {
        (avg.saturating_sub(3) / 10) as u8
    };
    let grey = 8 + 10 * u16::from(grey_idx);
    let dist = |a: (u8, u8, u8)| {
        let d = |x: u8, y: u8| (i32::from(x) - i32::from(y)).pow(2);
        d(a.0, r) + d(a.1, g) + d(a.2, b)
    };
    let g8 = grey as u8;
    if dist((g8, g8, g8)) < dist(cube_rgb) {
        232 + grey_idx
    } else {
        cube
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const PLAIN: RenderOptions = RenderOptions {
        color: false,
        width: Some(60),
    };
    const COLOR: RenderOptions = RenderOptions {
        color: true,
        width: Some(60),
    };

    fn plain(md: &str) -> String {
        render(md, PLAIN)
    }

    /// Removes SGR sequences (the only ones the renderer writes).
    fn unstyle(s: &str) -> String {
        let mut out = String::new();
        let mut it = s.chars().peekable();
        while let Some(c) = it.next() {
            if c == '\x1b' {
                for n in it.by_ref() {
                    if n == 'm' {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    /// Whether every escape sequence is an SGR colour `ESC [ digits/; m`.
    fn only_own_colors(s: &str) -> bool {
        s.split('\x1b').skip(1).all(|rest| {
            let Some(body) = rest.strip_prefix('[') else {
                return false;
            };
            let n = body
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == ';')
                .count();
            body[n..].starts_with('m')
        })
    }

    #[test]
    fn paragraphs_and_inline_styles_lose_their_markup() {
        assert_eq!(
            plain("Some **bold**, *italic*, ~~gone~~ and `code`.\n\nNext paragraph."),
            "Some bold, italic, gone and code.\n\nNext paragraph.\n"
        );
        let c = render("a **b** *c* `d`", COLOR);
        assert_eq!(c, "a \x1b[1mb\x1b[0m \x1b[3mc\x1b[0m \x1b[33md\x1b[0m\n");
    }

    #[test]
    fn words_keep_their_styles_when_glued() {
        assert_eq!(plain("**a**b and c*d*"), "ab and cd\n");
        assert_eq!(render("**a**b", COLOR), "\x1b[1ma\x1b[0mb\n");
    }

    #[test]
    fn headings() {
        assert_eq!(plain("# Title\n## Sub\ntext"), "Title\n\nSub\n\ntext\n");
        let c = render("# Title", COLOR);
        assert_eq!(c, "\x1b[1;4;35mTitle\x1b[0m\n");
        assert!(render("### Small", COLOR).starts_with("\x1b[1;36m"));
    }

    #[test]
    fn lists_nested_ordered_and_tasks() {
        assert_eq!(
            plain("- one\n- two\n  - inner\n- [x] done\n- [ ] todo"),
            "- one\n- two\n  - inner\n- [x] done\n- [ ] todo\n"
        );
        assert_eq!(plain("3. c\n4. d"), "3. c\n4. d\n");
        let c = unstyle(&render("- a\n  - b", COLOR));
        assert_eq!(c, "• a\n  ◦ b\n");
        // A loose list keeps its blank lines; text after it is a new block.
        assert_eq!(plain("- a\n\n- b\n\nafter"), "- a\n\n- b\n\nafter\n");
    }

    #[test]
    fn quotes_and_rules() {
        assert_eq!(
            plain("> quoted\n> more\n\n---\n\nx"),
            "> quoted more\n\n----------------------------------------\n\nx\n"
        );
        assert_eq!(unstyle(&render("> q", COLOR)), "│ q\n");
    }

    #[test]
    fn links_show_their_target() {
        assert_eq!(
            plain("see [the docs](https://example.com/d) and <https://x.org>"),
            "see the docs (https://example.com/d) and https://x.org\n"
        );
        let c = render("[d](https://e.com)", COLOR);
        assert!(c.contains("\x1b[4;34md\x1b[0m"), "{c:?}");
    }

    #[test]
    fn code_blocks_are_indented_and_highlighted() {
        let md = "```rust\nfn main() {\n    let x = 1;\n}\n```\n";
        assert_eq!(plain(md), "    fn main() {\n        let x = 1;\n    }\n");
        let c = render(md, COLOR);
        assert!(c.contains("\x1b[38;"), "highlighted: {c:?}");
        assert!(!c.contains("```"));
        assert_eq!(
            unstyle(&c),
            "  rust\n    fn main() {\n        let x = 1;\n    }\n"
        );
        // An unknown language is shown as it is.
        assert_eq!(
            unstyle(&render("```nope\na b\n```", COLOR)),
            "  nope\n    a b\n"
        );
    }

    #[test]
    fn tables_align_and_fit_the_width() {
        let md = "| name | n |\n|:---|---:|\n| alpha | 1 |\n| b | 200 |\n";
        assert_eq!(
            plain(md),
            "name  |   n\n------+----\nalpha |   1\nb     | 200\n"
        );
        let c = unstyle(&render(md, COLOR));
        assert_eq!(c, "name  │   n\n──────┼────\nalpha │   1\nb     │ 200\n");
        // Too wide: cells wrap inside their columns, within the width.
        let wide = "| a | b |\n|---|---|\n| one two three four five six seven | x |\n";
        let narrow = render(
            wide,
            RenderOptions {
                color: false,
                width: Some(20),
            },
        );
        for l in narrow.lines() {
            assert!(l.width() <= 20, "{l:?} in\n{narrow}");
        }
        assert!(narrow.contains("one two"), "{narrow}");
        assert!(narrow.lines().count() > 3, "{narrow}");
    }

    #[test]
    fn paragraphs_wrap_at_the_width_with_their_prefix() {
        let md = "- aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii jjjj kkkk";
        let out = render(
            md,
            RenderOptions {
                color: false,
                width: Some(24),
            },
        );
        assert_eq!(
            out,
            "- aaaa bbbb cccc dddd\n  eeee ffff gggg hhhh\n  iiii jjjj kkkk\n"
        );
        // No width: no wrapping.
        let out = render(
            md,
            RenderOptions {
                color: false,
                width: None,
            },
        );
        assert_eq!(out.lines().count(), 1);
    }

    #[test]
    fn control_characters_and_escapes_in_model_text_are_removed() {
        let evil = "a\x1b[2Jb\x1b]0;title\x07c\x1b[31md\x07e\x08f\r\ng\x1bPdcs\x1b\\h\u{9b}i\x7f";
        for opts in [PLAIN, COLOR] {
            let out = render(evil, opts);
            let text = unstyle(&out);
            assert_eq!(text, "abcdef ghi\n", "{out:?}");
        }
        // Colour off: no escape at all.
        assert!(!render(evil, PLAIN).contains('\x1b'));
        // Colour on: only the renderer's own colours.
        let out = render(&format!("**{evil}**"), COLOR);
        assert!(only_own_colors(&out), "{out:?}");
        assert_eq!(unstyle(&out), "abcdef ghi\n");
        assert!(!render("```\n\x1b[2J\n```", COLOR).contains("[2J"));
        assert_eq!(strip_controls("ok\ttab\n"), "ok\ttab\n");
    }

    #[test]
    fn streaming_prints_closed_blocks_and_keeps_the_tail() {
        let mut s = MarkdownStream::new(PLAIN);
        assert_eq!(s.push("# Head"), "");
        assert_eq!(s.push("ing\nSome **bo"), "Heading\n");
        assert_eq!(s.push("ld** text"), "");
        assert_eq!(
            s.push(" here.\n\n```rust\nfn x() {}\n"),
            "\nSome bold text here.\n"
        );
        assert_eq!(s.push("\n\nstill code\n"), "", "inside the fence");
        assert_eq!(
            s.push("```\nafter"),
            "\n    fn x() {}\n\n\n    still code\n"
        );
        assert!(s.is_pending());
        assert_eq!(s.finish(), "\nafter\n");
        assert!(!s.is_pending());
        // A new message starts without a blank line.
        assert_eq!(s.push("new\n\n"), "new\n");
    }

    #[test]
    fn streaming_gives_the_same_text_as_a_whole_render() {
        let md = "# Plan\n\nFirst **step** and a list:\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```sh\necho hi\n```\nDone.";
        let whole = render(md, PLAIN);
        for size in [1, 3, 7, 50] {
            let mut s = MarkdownStream::new(PLAIN);
            let mut out = String::new();
            let chars: Vec<char> = md.chars().collect();
            for piece in chars.chunks(size) {
                out.push_str(&s.push(&piece.iter().collect::<String>()));
            }
            out.push_str(&s.finish());
            assert_eq!(out, whole, "pieces of {size}");
        }
    }

    #[test]
    fn fences_are_recognised() {
        assert_eq!(complete_prefix("```\na\n\nb\n"), 0);
        assert_eq!(complete_prefix("```\na\n```\nrest"), 10);
        assert_eq!(complete_prefix("~~~~\n```\n~~~~\n"), 14);
        assert_eq!(complete_prefix("para\n\nmore"), 6);
        assert_eq!(complete_prefix("## h\npara"), 5);
        assert_eq!(complete_prefix("#nospace\n"), 0);
    }

    #[test]
    fn columns_share_the_width() {
        assert_eq!(fit_columns(&[5, 5], &[1, 1], 20), vec![5, 5]);
        assert_eq!(fit_columns(&[3, 40], &[1, 5], 20), vec![3, 17]);
        let w = fit_columns(&[30, 40], &[4, 4], 20);
        assert_eq!(w.iter().sum::<usize>(), 20);
        assert_eq!(fit_columns(&[30, 30], &[12, 12], 10), vec![12, 12]);
    }

    #[test]
    fn palette_approximation() {
        assert_eq!(ansi256(0, 0, 0), 16);
        assert_eq!(ansi256(255, 255, 255), 231);
        assert_eq!(ansi256(255, 0, 0), 196);
        assert_eq!(ansi256(128, 128, 128), 244);
    }
}
